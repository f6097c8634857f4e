"""The client: a channel with the token, deadline and retry interceptor, and its stub."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from ranking.v1 import ranking_pb2_grpc

#: The deadline of a unary call made without a ``timeout`` (seconds).
DEFAULT_DEADLINE = 10.0


@dataclass(frozen=True)
class RetryPolicy:
    """How a call the service shed or could not take is repeated.

    Every call of the service may be repeated: writes carry idempotent event ids, reads and
    recomputes change nothing a repeat could double. The wait before the first retry is
    ``base_delay``, doubled each time up to ``max_delay``, each stretched at random by up to
    its own length (callers refused together do not come back together); a shed call waits
    at least what its RetryInfo asks. No wait starts that would end past the call's deadline.
    """

    max_attempts: int = 6
    base_delay: float = 0.05
    max_delay: float = 2.0


def retry_after(error: grpc.RpcError) -> Optional[float]:
    """What the service asked a shed call to wait (its ``google.rpc.RetryInfo``), in seconds."""
    if not isinstance(error, grpc.Call):
        return None
    status = rpc_status.from_call(error)
    if status is None:
        return None
    for detail in status.details:
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            detail.Unpack(info)
            if info.HasField("retry_delay"):
                return info.retry_delay.ToTimedelta().total_seconds()
    return None


def retryable(error: grpc.RpcError) -> bool:
    """Whether a failed call is worth repeating: the service could not be reached
    (UNAVAILABLE), or it shed the call and said when to retry (RESOURCE_EXHAUSTED with
    RetryInfo; one without refuses the request itself, e.g. one over the size limit)."""
    if not isinstance(error, grpc.Call):
        return False
    code = error.code()
    if code == grpc.StatusCode.UNAVAILABLE:
        return True
    return code == grpc.StatusCode.RESOURCE_EXHAUSTED and retry_after(error) is not None


OnRetry = Callable[[str, int, grpc.RpcError, float], None]


class _Details(grpc.ClientCallDetails):
    """The call's details with the token added and a deadline (the generated namedtuple-like
    object of grpc is not constructible from outside)."""

    def __init__(self, base: grpc.ClientCallDetails, metadata: list, timeout: Optional[float]):
        self.method = base.method
        self.timeout = timeout
        self.metadata = metadata
        self.credentials = base.credentials
        self.wait_for_ready = getattr(base, "wait_for_ready", None)
        self.compression = getattr(base, "compression", None)


class _Interceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    def __init__(self, token: Optional[str], deadline: float, retry: RetryPolicy, on_retry: Optional[OnRetry]):
        self._auth = [("authorization", f"Bearer {token}")] if token else []
        self._deadline = deadline
        self._retry = retry
        self._on_retry = on_retry

    def _metadata(self, details: grpc.ClientCallDetails) -> list:
        return list(details.metadata or []) + self._auth

    def intercept_unary_unary(self, continuation: Any, details: grpc.ClientCallDetails, request: Any) -> Any:
        metadata = self._metadata(details)
        timeout = details.timeout if details.timeout is not None else self._deadline
        end = time.monotonic() + timeout
        delay = self._retry.base_delay
        attempt = 1
        while True:
            remaining = end - time.monotonic()
            outcome = continuation(_Details(details, metadata, max(remaining, 0.0)), request)
            error = outcome.exception()
            if error is None or attempt >= self._retry.max_attempts or not retryable(error):
                return outcome
            wait = delay + random.uniform(0, delay)
            asked = retry_after(error)
            if asked is not None and asked > wait:
                wait = asked
            if time.monotonic() + wait >= end:
                return outcome
            attempt += 1
            if self._on_retry is not None:
                self._on_retry(details.method, attempt, error, wait)
            time.sleep(wait)
            delay = min(2 * delay, self._retry.max_delay)

    def intercept_unary_stream(self, continuation: Any, details: grpc.ClientCallDetails, request: Any) -> Any:
        # Streams (WatchTopN) live as long as their reader wants: no default deadline, no retry.
        return continuation(_Details(details, self._metadata(details), details.timeout), request)


class RankingClient:
    """A connection to the ranking service; ``stub`` has every RPC of ``ranking.v1``.

    ``token`` is the bearer token of every call (the service has one per class of calls:
    write, read, and admin, which also opens the reads). ``deadline`` is given to a unary
    call made without ``timeout``; a retried call keeps its first attempt's deadline.
    ``root_certificates`` (PEM bytes) or ``tls=True`` (the system's authorities) make the
    connection TLS. ``on_retry(method, attempt, error, wait)`` is told of every repeat.
    """

    def __init__(
        self,
        endpoint: str,
        token: Optional[str] = None,
        *,
        deadline: float = DEFAULT_DEADLINE,
        tls: bool = False,
        root_certificates: Optional[bytes] = None,
        retry: RetryPolicy = RetryPolicy(),
        on_retry: Optional[OnRetry] = None,
        options: Optional[list] = None,
    ) -> None:
        if tls or root_certificates is not None:
            credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
            channel = grpc.secure_channel(endpoint, credentials, options=options)
        else:
            channel = grpc.insecure_channel(endpoint, options=options)
        self._channel = channel
        intercepted = grpc.intercept_channel(channel, _Interceptor(token, deadline, retry, on_retry))
        self.stub = ranking_pb2_grpc.RankingServiceStub(intercepted)

    def close(self) -> None:
        """Closes the connection; calls in progress fail."""
        self._channel.close()

    def __enter__(self) -> "RankingClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
