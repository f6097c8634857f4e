// The client's example, shared by src/example.ts and the tests: record a batch of events
// (one of them a retraction), recompute today, walk the top with page tokens, read a rank
// with its neighbours and an explanation, printing each.

import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import {
  EventType,
  Window,
  type EventSchema,
  type ExplainRankResponse,
  type GetRankResponse,
  type RankingClient,
  type RecomputeResponse,
  type RecordEventsResponse,
} from "./index.js";

/** Product p gets p views, product 3 an order, product 12 a like, and one of 12's views is retracted. */
export const PRODUCTS = 12;

/** What the tour read, for its callers to check. */
export interface Seen {
  recorded: RecordEventsResponse;
  recompute: RecomputeResponse;
  /** The product ids of each page of the top, in order. */
  pages: bigint[][];
  rank: GetRankResponse;
  explain: ExplainRankResponse;
}

/** The tour's batch; `prefix` keeps its event ids apart from another run's. */
export function events(prefix: string): MessageInitShape<typeof EventSchema>[] {
  const occurredAt = timestampNow();
  const batch: MessageInitShape<typeof EventSchema>[] = [];
  for (let p = 1; p <= PRODUCTS; p++) {
    for (let i = 0; i < p; i++) {
      batch.push({ eventId: `${prefix}-view-${p}-${i}`, productId: BigInt(p), type: EventType.VIEW, occurredAt });
    }
  }
  batch.push(
    { eventId: `${prefix}-order-3`, productId: 3n, type: EventType.ORDER, amount: 10_000n, occurredAt },
    { eventId: `${prefix}-like-12`, productId: 12n, type: EventType.LIKE, occurredAt },
    // A refund or fraud check takes a view back: it leaves the day's counts once.
    { eventId: `${prefix}-retract-12`, productId: 12n, type: EventType.RETRACT, retracts: `${prefix}-view-12-0`, occurredAt },
  );
  return batch;
}

/** Records with `writer`, reads with `admin` (its token opens the reads and Recompute). */
export async function run(writer: RankingClient, admin: RankingClient, prefix: string, print: (line: string) => void = console.log): Promise<Seen> {
  const recorded = await writer.recordEvents({ events: events(prefix) });
  print(`recorded: ${recorded.accepted} accepted, ${recorded.duplicates} duplicates`);
  const recompute = await admin.recompute({});
  print(`recomputed ${recompute.date}: ${recompute.products} products, version ${recompute.version}`);

  // A walk by page token reads one version of the ranking however often it is republished.
  const pages: bigint[][] = [];
  let page = await admin.getTopN({ window: Window.DAILY, limit: 5 });
  for (;;) {
    pages.push(page.products.map((p) => p.productId));
    for (const p of page.products) print(`#${p.rank} product ${p.productId} score ${p.score.toFixed(9)}`);
    if (!page.nextPageToken) break;
    page = await admin.getTopN({ pageToken: page.nextPageToken });
  }

  const rank = await admin.getRank({ productId: 11n, neighbors: 1 });
  const ids = (ps: { productId: bigint }[]) => ps.map((p) => p.productId).join(", ");
  print(`product 11 is #${rank.product?.rank} of ${rank.total} (above: [${ids(rank.above)}], below: [${ids(rank.below)}])`);

  const explain = await admin.explainRank({ productId: 12n });
  print(
    `product 12: ${explain.views} views (${explain.retractedViews} retracted), ${explain.likes} likes: ` +
      `${explain.viewPoints.toFixed(1)} + ${explain.likePoints.toFixed(1)} = ${explain.mainScore.toFixed(3)}`,
  );
  return { recorded, recompute, pages, rank, explain };
}
