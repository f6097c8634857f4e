// The client against a real server: the tour's answers, a shed call retried, a wrong token
// refused.

import assert from "node:assert/strict";
import { test } from "node:test";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, EventType, createRankingClient, retryAfterMs } from "../src/index.js";
import * as tour from "../src/tour.js";
import { TOKENS, startServer } from "./server.js";

test("the tour reads what it recorded", async () => {
  const server = await startServer();
  try {
    const writer = createRankingClient({ endpoint: server.endpoint, token: TOKENS.write });
    const admin = createRankingClient({ endpoint: server.endpoint, token: TOKENS.admin });
    const seen = await tour.run(writer, admin, "node-tour");
    const batch = tour.events("node-tour");
    assert.equal(seen.recorded.accepted, batch.length);
    assert.equal(seen.recompute.products, BigInt(tour.PRODUCTS));
    // Product 3's order puts it first; 12 and 11 have 11 counted views each (one of 12's
    // was retracted) and 12's like breaks the tie; the rest follow their views.
    assert.deepEqual(seen.pages, [[3n, 12n, 11n, 10n, 9n], [8n, 7n, 6n, 5n, 4n], [2n, 1n]]);
    assert.equal(seen.rank.product?.rank, 3n);
    assert.deepEqual([seen.rank.above.map((p) => p.productId), seen.rank.below.map((p) => p.productId)], [[12n], [10n]]);
    const e = seen.explain;
    assert.deepEqual([e.views, e.retractedViews, e.likes, e.product?.rank, e.product?.breakdown?.mainFloor], [11n, 1n, 1n, 2n, 1n]);
    // The same batch again is taken once: every event a duplicate.
    const again = await writer.recordEvents({ events: batch });
    assert.deepEqual([again.accepted, again.duplicates], [0, batch.length]);
  } finally {
    await server.stop();
  }
});

test("shed calls are retried until taken", async () => {
  const server = await startServer({ RANKING_MAX_CONCURRENT_CALLS: "1" });
  try {
    let shed = 0;
    const client = createRankingClient({
      endpoint: server.endpoint,
      token: TOKENS.write,
      deadlineMs: 60_000,
      retry: { maxAttempts: 50, baseDelayMs: 10, maxDelayMs: 200 },
      onRetry: (_method, _attempt, error) => {
        if (error.code === Code.ResourceExhausted && retryAfterMs(error) !== undefined) shed++;
      },
    });
    // Crowds of 32 concurrent batches until one was shed (the first crowd, in practice).
    const deadline = Date.now() + 60_000;
    for (let round = 0; shed === 0; round++) {
      assert.ok(Date.now() < deadline, "no call was shed in 60 s of crowds against a limit of one call");
      const crowd = Array.from({ length: 32 }, (_, c) =>
        client.recordEvents({
          events: Array.from({ length: 200 }, (_, i) => ({
            eventId: `shed-${round}-${c}-${i}`,
            productId: BigInt(1 + i),
            type: EventType.VIEW,
            occurredAt: timestampNow(),
          })),
        }),
      );
      for (const answer of await Promise.all(crowd)) assert.equal(answer.accepted, 200);
    }
  } finally {
    await server.stop();
  }
});

test("a wrong token is refused and not retried", async () => {
  const server = await startServer();
  try {
    let retries = 0;
    const client = createRankingClient({ endpoint: server.endpoint, token: "not-a-token", onRetry: () => retries++ });
    await assert.rejects(client.getTopN({}), (e) => e instanceof ConnectError && e.code === Code.Unauthenticated);
    assert.equal(retries, 0);
  } finally {
    await server.stop();
  }
});

test("TLS, trusting the service's certificate", async () => {
  const server = await startServer({}, true);
  try {
    const client = createRankingClient({ endpoint: server.endpoint, token: TOKENS.admin, ca: server.ca });
    const access = await client.getAccess({});
    assert.deepEqual([access.admin, access.read, access.write], [true, true, false]);
    // Without trusting it, the connection fails; that is not taken for a shed call.
    const stranger = createRankingClient({ endpoint: server.endpoint, token: TOKENS.admin, retry: { maxAttempts: 1 } });
    await assert.rejects(stranger.getAccess({}), (e) => e instanceof ConnectError && e.code !== Code.ResourceExhausted);
  } finally {
    await server.stop();
  }
});
