"""Slow clients against the server `specwatch serve` runs (agent/http/serve.py uvicorn_config): a request that
trickles in (slowloris) or a connection that stays idle is closed, raw sockets on a loopback port."""

from __future__ import annotations

import socket
import time

import pytest

from agent.runtime.config import SidecarConfig
from running import Running

READ_TIMEOUT = 1.0
PATIENCE = 15.0  # how long the client waits for the server to close: well past READ_TIMEOUT


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    db = f"sqlite:///{tmp_path_factory.mktemp('timeouts') / 'served.db'}"
    config = SidecarConfig(db=db, pod="timeouts", policy="heuristic+switch", read_timeout=READ_TIMEOUT,
                           keepalive_seconds=READ_TIMEOUT)
    with Running(config) as r:
        yield r


def connect(server) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", server.config.port))
    s.settimeout(PATIENCE)
    return s


def closed_by_server(s: socket.socket) -> bytes:
    """Everything the server sent until it closed; fails if it never closed within PATIENCE."""
    got = b""
    try:
        while chunk := s.recv(65536):
            got += chunk
    except socket.timeout:
        pytest.fail(f"the server kept the connection open {PATIENCE} s (received {got[:80]!r})")
    finally:
        s.close()
    return got


def test_half_a_request_line_is_cut_off(server):
    s = connect(server)
    s.sendall(b"POST /v1/st")
    started = time.monotonic()
    assert closed_by_server(s) == b""
    assert time.monotonic() - started < PATIENCE


def test_headers_sent_slowly_are_cut_off(server):
    s = connect(server)
    for piece in (b"GET /healthz HTTP/1.1\r\n", b"Host: x\r\n", b"X-Slow: 1\r\n"):
        s.sendall(piece)
        time.sleep(READ_TIMEOUT / 3)  # each piece in time, the whole request not
    closed_by_server(s)


def test_a_body_that_never_completes_is_cut_off(server):
    s = connect(server)
    s.sendall(b"POST /v1/steps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: 1000\r\n\r\n{\"records\": [")
    closed_by_server(s)


def test_a_silent_connection_is_closed(server):
    closed_by_server(connect(server))


def test_an_idle_keep_alive_connection_is_closed_after_an_answer(server):
    s = connect(server)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    got = closed_by_server(s)
    assert got.startswith(b"HTTP/1.1 200") and got.endswith(b'{"status":"ok"}')


def test_whole_requests_on_a_kept_alive_connection_are_answered(server):
    s = connect(server)
    for _ in range(3):
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        while not got.endswith(b'{"status":"ok"}'):
            got += s.recv(65536)
        assert got.startswith(b"HTTP/1.1 200")
        time.sleep(READ_TIMEOUT / 2)  # idle, but less than the keep-alive timeout
    s.close()
