"""Python client of the ranking service.

The generated stubs of ``ranking.v1`` (``ranking.v1.ranking_pb2`` and ``ranking_pb2_grpc``,
with typed ``.pyi`` stubs) behind a channel that sets what a caller needs in production on
every call: the bearer token, a default deadline, TLS, and the retry of a call the service
shed (RESOURCE_EXHAUSTED with a ``google.rpc.RetryInfo`` detail) or could not take
(UNAVAILABLE), bounded in attempts and by the call's deadline::

    from ranking_client import RankingClient, pb

    with RankingClient("127.0.0.1:50051", token=token) as client:
        top = client.stub.GetTopN(pb.GetTopNRequest(limit=10))
"""

from ranking.v1 import ranking_pb2 as pb
from ranking.v1 import ranking_pb2_grpc as pb_grpc

from .client import DEFAULT_DEADLINE, RankingClient, RetryPolicy, retry_after, retryable

__all__ = ["DEFAULT_DEADLINE", "RankingClient", "RetryPolicy", "pb", "pb_grpc", "retry_after", "retryable"]
