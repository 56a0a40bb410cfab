"""Running a built runtime under uvicorn until SIGTERM/SIGINT, and its shutdown in two budgeted phases:
``drain`` (uvicorn stops accepting, requests in flight may finish; those still running then are cut, and
said to be) and ``close`` (the final flush and the alert state; what the database has not taken by then
goes to the dead-letter file, agent/runtime/closing.py). A watchdog ends the process if even that overruns
(``Shutdown.total``), rather than overrun Kubernetes' grace period. The last log line says what was flushed,
dead-lettered or lost; the exit code is 0 unless the server could not start or a record was lost.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import threading
from dataclasses import dataclass
from typing import Any, Callable

import uvicorn

log = logging.getLogger("specwatch")


@dataclass(frozen=True)
class Shutdown:
    """Seconds each phase of a shutdown may take; ``margin`` for the dead-letter file and the exit."""

    drain: float
    close: float
    margin: float = 2.0

    def __post_init__(self) -> None:
        for name in ("drain", "close", "margin"):
            value = getattr(self, name)
            if type(value) not in (int, float) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"shutdown {name}: must be a positive number of seconds, got {value!r}")

    @property
    def total(self) -> float:
        """When the watchdog ends the process, counted from the signal."""
        return self.drain + self.close + self.margin

    @classmethod
    def within(cls, seconds: float) -> "Shutdown":
        """The phases of a shutdown that must end within ``seconds`` in all (`specwatch serve`)."""
        return cls(drain=seconds / 3, close=seconds / 2, margin=seconds / 6)


def run_until_signal(runtime: Any, server_config: uvicorn.Config, shutdown: Shutdown,
                     announce: Callable[[], None], sockets: list | None = None) -> int:
    """Serve ``runtime.app`` under uvicorn until SIGTERM/SIGINT (``runtime.on_signal()`` is called then, if
    the runtime has one), then ``runtime.close(shutdown.close)``, which returns a agent.runtime.closing.Closed;
    the exit code. ``sockets``: bound sockets to serve instead of the config's host and port."""
    on_signal = getattr(runtime, "on_signal", None)
    server = _Server(server_config, lambda: (_watchdog(shutdown.total), on_signal and on_signal()))
    # uvicorn re-raises the signal it caught once it has stopped; these handlers make that (and a second
    # signal during the final flush) harmless, so the flush always completes.
    previous = {sig: signal.signal(sig, _ignore) for sig in (signal.SIGTERM, signal.SIGINT)}
    runtime.start()
    announce()
    closed = None
    try:
        server.run(sockets=sockets)
    finally:
        try:
            closed = runtime.close(shutdown.close)
            if closed.clean:
                log.info("shut down cleanly in %.2f s: %s", closed.seconds, closed.describe())
            else:
                log.error("shut down in %.2f s: %s", closed.seconds, closed.describe())
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    code = 0 if (server.started or server.should_exit) and not closed.lost else 1
    if not closed.finished:
        # A thread is still held by the database: the interpreter would wait for it at exit (up to the
        # statement timeout), past the grace period. Everything it held is in the dead-letter file.
        logging.shutdown()
        os._exit(code)
    return code


class _Server(uvicorn.Server):
    """uvicorn.Server that calls ``on_signal`` when the exit signal arrives."""

    def __init__(self, config: uvicorn.Config, on_signal: Callable[[], Any]):
        super().__init__(config)
        self._on_signal = on_signal

    def handle_exit(self, sig: int, frame) -> None:
        if not self.should_exit:
            self._on_signal()
        super().handle_exit(sig, frame)


def _watchdog(seconds: float) -> None:
    def expire() -> None:
        log.error("shutdown took longer than %.1f s; exiting without finishing it", seconds)
        os._exit(1)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()


def _ignore(sig: int, _frame) -> None:
    log.info("signal %d during shutdown: already shutting down", sig)
