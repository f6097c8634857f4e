"""A real server for the tests: the binary named by RANKING_SERVER_BIN, its own SQLite file,
port and tokens, stopped when the test ends."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

from ranking_client import RankingClient, RetryPolicy, pb  # noqa: E402

READ_TOKEN = "py-client-read"
WRITE_TOKEN = "py-client-write"
ADMIN_TOKEN = "py-client-admin"


@dataclass
class Server:
    endpoint: str


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made by openssl for the test."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )
    return cert, key


def start(tmp_path: Path, root_certificates: bytes | None = None, **env: str):
    binary = os.environ.get("RANKING_SERVER_BIN")
    if not binary:
        pytest.fail("RANKING_SERVER_BIN names the ranking server binary the client is tested against")
    endpoint = f"127.0.0.1:{_free_port()}"
    environment = {
        "PATH": os.environ.get("PATH", ""),
        "RANKING_LISTEN": endpoint,
        "DATABASE_URL": f"sqlite://{tmp_path / 'ranking.db'}?mode=rwc",
        "RANKING_READ_TOKEN": READ_TOKEN,
        "RANKING_WRITE_TOKEN": WRITE_TOKEN,
        "RANKING_ADMIN_TOKEN": ADMIN_TOKEN,
        "RANKING_METRICS_LISTEN": "",
        "RANKING_SHUTDOWN_GRACE": "1s",
        "RUST_LOG": "warn",
        **env,
    }
    process = subprocess.Popen([binary], env=environment, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    with RankingClient(endpoint, retry=RetryPolicy(max_attempts=1), root_certificates=root_certificates) as probe:
        while True:
            try:
                probe.stub.GetAccess(pb.GetAccessRequest(), timeout=1)
                break
            except grpc.RpcError as error:
                if process.poll() is not None:
                    pytest.fail(f"the server exited before it answered: {error}")
                if time.monotonic() > deadline:
                    process.kill()
                    pytest.fail(f"the server did not answer within 60 s: {error}")
                time.sleep(0.05)
    return process, Server(endpoint)


def stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture
def server(tmp_path: Path):
    process, s = start(tmp_path)
    yield s
    stop(process)


@pytest.fixture
def one_call_server(tmp_path: Path):
    """A server that takes one call at a time and sheds the rest."""
    process, s = start(tmp_path, RANKING_MAX_CONCURRENT_CALLS="1")
    yield s
    stop(process)


@pytest.fixture
def tls_server(tmp_path: Path):
    """A server on TLS with a certificate made for the test; yields it and the certificate."""
    cert, key = self_signed(tmp_path)
    process, s = start(tmp_path, cert.read_bytes(), RANKING_TLS_CERT=str(cert), RANKING_TLS_KEY=str(key))
    yield s, cert.read_bytes()
    stop(process)
