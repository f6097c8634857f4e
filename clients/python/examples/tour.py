"""The client's example: record a batch of events (one of them a retraction), recompute
today, walk the top with page tokens, read a rank with its neighbours and an explanation.

    RANKING_ENDPOINT=127.0.0.1:50051 RANKING_WRITE_TOKEN=… RANKING_ADMIN_TOKEN=… python examples/tour.py
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import TextIO

from google.protobuf.timestamp_pb2 import Timestamp

from ranking_client import RankingClient, pb

#: Product p gets p views, product 3 an order, product 12 a like, and one of product 12's
#: views is retracted.
PRODUCTS = 12


@dataclass
class Seen:
    """What the tour read, for its callers to check."""

    recorded: pb.RecordEventsResponse
    recompute: pb.RecomputeResponse
    pages: list[list[int]] = field(default_factory=list)
    rank: pb.GetRankResponse | None = None
    explain: pb.ExplainRankResponse | None = None


def events(prefix: str) -> list[pb.Event]:
    """The tour's batch; ``prefix`` keeps its event ids apart from another run's."""
    at = Timestamp()
    at.GetCurrentTime()
    batch = [
        pb.Event(event_id=f"{prefix}-view-{p}-{i}", product_id=p, type=pb.EVENT_TYPE_VIEW, occurred_at=at)
        for p in range(1, PRODUCTS + 1)
        for i in range(p)
    ]
    return batch + [
        pb.Event(event_id=f"{prefix}-order-3", product_id=3, type=pb.EVENT_TYPE_ORDER, amount=10_000, occurred_at=at),
        pb.Event(event_id=f"{prefix}-like-12", product_id=12, type=pb.EVENT_TYPE_LIKE, occurred_at=at),
        # A refund or fraud check takes a view back: it leaves the day's counts once.
        pb.Event(
            event_id=f"{prefix}-retract-12",
            product_id=12,
            type=pb.EVENT_TYPE_RETRACT,
            retracts=f"{prefix}-view-12-0",
            occurred_at=at,
        ),
    ]


def run(writer: RankingClient, admin: RankingClient, prefix: str, out: TextIO = sys.stdout) -> Seen:
    """Records with ``writer``, reads with ``admin`` (its token opens the reads and Recompute)."""
    recorded = writer.stub.RecordEvents(pb.RecordEventsRequest(events=events(prefix)))
    print(f"recorded: {recorded.accepted} accepted, {recorded.duplicates} duplicates", file=out)
    recompute = admin.stub.Recompute(pb.RecomputeRequest())
    print(f"recomputed {recompute.date}: {recompute.products} products, version {recompute.version}", file=out)
    seen = Seen(recorded=recorded, recompute=recompute)

    # A walk by page token reads one version of the ranking however often it is republished.
    request = pb.GetTopNRequest(window=pb.WINDOW_DAILY, limit=5)
    while True:
        page = admin.stub.GetTopN(request)
        seen.pages.append([p.product_id for p in page.products])
        for p in page.products:
            print(f"#{p.rank} product {p.product_id} score {p.score:.9f}", file=out)
        if not page.next_page_token:
            break
        request = pb.GetTopNRequest(page_token=page.next_page_token)

    seen.rank = admin.stub.GetRank(pb.GetRankRequest(product_id=11, neighbors=1))
    above = [p.product_id for p in seen.rank.above]
    below = [p.product_id for p in seen.rank.below]
    print(f"product 11 is #{seen.rank.product.rank} of {seen.rank.total} (above: {above}, below: {below})", file=out)

    e = seen.explain = admin.stub.ExplainRank(pb.ExplainRankRequest(product_id=12))
    print(
        f"product 12: {e.views} views ({e.retracted_views} retracted), {e.likes} likes: "
        f"{e.view_points:.1f} + {e.like_points:.1f} = {e.main_score:.3f}",
        file=out,
    )
    return seen


def main() -> None:
    endpoint = os.environ.get("RANKING_ENDPOINT", "127.0.0.1:50051")
    with RankingClient(endpoint, os.environ.get("RANKING_WRITE_TOKEN")) as writer, RankingClient(
        endpoint, os.environ.get("RANKING_ADMIN_TOKEN")
    ) as admin:
        run(writer, admin, f"example-{time.time_ns()}")


if __name__ == "__main__":
    main()
