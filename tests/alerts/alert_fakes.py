"""Fakes for the alert lifecycle and sink tests: a settable clock, recording and failing sinks, and a
local HTTP receiver."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from alerts.alert import Alert
from alerts.sinks.base import Sink

T0 = 1_700_000_000.0


class Clock:
    """A settable clock, so no lifecycle test depends on the wall clock."""

    def __init__(self, now: float = T0):
        self.now = now

    def __call__(self) -> float:
        return self.now


class RecordingSink(Sink):
    """Keeps every batch it is sent. ``fail_times``: raise that many times first. ``gate``: an Event the
    sink waits on before each send (a sink that hangs until the test lets it go)."""

    def __init__(self, name: str = "recording", resend: bool = True, fail_times: int = 0,
                 gate: threading.Event | None = None):
        self.name, self.resend = name, resend
        self.fail_times, self.gate = fail_times, gate
        self.batches: list[list[Alert]] = []
        self.attempts = 0
        self.closed = False

    def send(self, alerts: Sequence[Alert]) -> None:
        self.attempts += 1
        if self.gate is not None:
            self.gate.wait()
        if self.fail_times > 0:
            self.fail_times -= 1
            raise ConnectionError("receiver down")
        self.batches.append(list(alerts))

    def close(self) -> None:
        self.closed = True

    @property
    def sent(self) -> list[Alert]:
        return [a for batch in self.batches for a in batch]

    def states(self) -> list[tuple[str, str, str]]:
        """(alertname, domain, state) of every alert sent, in order."""
        return [(a.labels["alertname"], a.labels["domain"], a.state) for a in self.sent]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Receiver:
    """An HTTP server on a thread that records JSON bodies POSTed to it and answers ``status``."""

    def __init__(self, port: int = 0, status: int = 200):
        self.bodies: list = []
        self.paths: list[str] = []
        self.status = status
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                if receiver.status < 300:
                    receiver.bodies.append(body)
                    receiver.paths.append(self.path)
                self.send_response(receiver.status)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join()
