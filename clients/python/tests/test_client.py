"""The client against a real server: the tour's answers, a shed call retried, a wrong token
refused."""

from __future__ import annotations

import io
import threading
import time

import grpc
import pytest

import tour
from conftest import ADMIN_TOKEN, WRITE_TOKEN
from ranking_client import RankingClient, RetryPolicy, pb, retry_after


def test_the_tour_reads_what_it_recorded(server):
    with RankingClient(server.endpoint, WRITE_TOKEN) as writer, RankingClient(server.endpoint, ADMIN_TOKEN) as admin:
        printed = io.StringIO()
        seen = tour.run(writer, admin, "py-tour", printed)
        print(printed.getvalue())
        batch = tour.events("py-tour")
        assert seen.recorded.accepted == len(batch)
        assert seen.recompute.products == tour.PRODUCTS
        # Product 3's order puts it first; 12 and 11 have 11 counted views each (one of 12's
        # was retracted) and 12's like breaks the tie; the rest follow their views.
        assert seen.pages == [[3, 12, 11, 10, 9], [8, 7, 6, 5, 4], [2, 1]]
        assert seen.rank.product.rank == 3 and seen.rank.total == tour.PRODUCTS
        assert [p.product_id for p in seen.rank.above] == [12]
        assert [p.product_id for p in seen.rank.below] == [10]
        e = seen.explain
        assert (e.views, e.retracted_views, e.likes) == (11, 1, 1)
        assert (e.product.rank, e.product.breakdown.main_floor) == (2, 1)
        # The same batch again is taken once: every event a duplicate.
        again = writer.stub.RecordEvents(pb.RecordEventsRequest(events=batch))
        assert (again.accepted, again.duplicates) == (0, len(batch))


def test_shed_calls_are_retried_until_taken(one_call_server):
    shed = []
    lock = threading.Lock()

    def on_retry(method, attempt, error, wait):
        if error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and retry_after(error) is not None:
            with lock:
                shed.append(method)

    client = RankingClient(
        one_call_server.endpoint,
        WRITE_TOKEN,
        deadline=60,
        retry=RetryPolicy(max_attempts=50, base_delay=0.01, max_delay=0.2),
        on_retry=on_retry,
    )
    failures = []

    def record(round_: int, caller: int) -> None:
        at = pb.Event().occurred_at
        at.GetCurrentTime()
        events = [
            pb.Event(event_id=f"shed-{round_}-{caller}-{i}", product_id=1 + i, type=pb.EVENT_TYPE_VIEW, occurred_at=at)
            for i in range(200)
        ]
        try:
            answer = client.stub.RecordEvents(pb.RecordEventsRequest(events=events))
            if answer.accepted != 200:
                failures.append(f"accepted {answer.accepted} of 200")
        except grpc.RpcError as error:
            failures.append(error)

    # Crowds of 32 concurrent batches until one was shed (the first crowd, in practice).
    deadline = time.monotonic() + 60
    round_ = 0
    with client:
        while not shed:
            assert time.monotonic() < deadline, "no call was shed in 60 s of crowds against a limit of one call"
            callers = [threading.Thread(target=record, args=(round_, c)) for c in range(32)]
            for t in callers:
                t.start()
            for t in callers:
                t.join()
            assert failures == []
            round_ += 1


def test_a_wrong_token_is_refused_and_not_retried(server):
    retries = []
    with RankingClient(server.endpoint, "not-a-token", on_retry=lambda *a: retries.append(a)) as client:
        with pytest.raises(grpc.RpcError) as refused:
            client.stub.GetTopN(pb.GetTopNRequest())
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert retries == []


def test_tls_trusting_the_services_certificate(tls_server):
    server, certificate = tls_server
    with RankingClient(server.endpoint, ADMIN_TOKEN, root_certificates=certificate) as client:
        access = client.stub.GetAccess(pb.GetAccessRequest())
        assert (access.admin, access.read, access.write) == (True, True, False)
    # Plaintext against the TLS port fails, and is not taken for a shed call.
    with RankingClient(server.endpoint, ADMIN_TOKEN, retry=RetryPolicy(max_attempts=1)) as plain:
        with pytest.raises(grpc.RpcError) as refused:
            plain.stub.GetAccess(pb.GetAccessRequest())
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
