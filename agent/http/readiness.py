"""/readyz without waiting on the database: a cached probe refreshed on a thread of its own.

The database check (take a write transaction) runs on a probe thread, at most one at a time. /readyz
starts a probe when the last result is older than ``interval``, waits up to ``wait`` seconds for it, and
otherwise answers from what it has: while a probe has been running ``wait`` seconds or more (or none has
finished yet) the database check fails as "stale: no answer for N s", with the last answer and its age. The other checks (ingest worker, step ring, models) read memory and run
on every call. So /readyz answers within ``wait`` seconds (under 2) whatever the database does, and a
hung database never piles up probe threads.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

from storage import StoreError

OK = ("ok", "not configured")


class Readiness:
    """See the module docstring. ``report()`` (a coroutine) -> (ready, checks)."""

    def __init__(self, sidecar: Any, *, ring: Any = None, generator: Any = None, models_configured: bool = False,
                 interval: float = 1.0, wait: float = 1.5, clock: Callable[[], float] = time.monotonic):
        self.sidecar, self.ring, self.generator, self.models_configured = sidecar, ring, generator, models_configured
        self.interval, self.wait, self._clock = interval, wait, clock
        self._lock = threading.Lock()
        self._result: tuple[float, str] | None = None  # (when it finished, outcome)
        self._running_since: float | None = None
        self._done = threading.Event()

    async def report(self) -> tuple[bool, dict[str, str]]:
        checks = {"database": await self._database(), "ingest": ingest_check(self.sidecar),
                  "ring": "not configured" if self.ring is None else "ok" if self.ring.alive else "reader stopped",
                  "models": models_check(self.generator) if self.models_configured else "not configured"}
        return all(v in OK for v in checks.values()), checks

    async def _database(self) -> str:
        if self.sidecar.flush_error:
            return f"last flush failed: {self.sidecar.flush_error}"
        now = self._clock()
        result = self._result
        if result is None or now - result[0] >= self.interval:
            done = self._start_probe()
            deadline = now + self.wait
            while not done.is_set() and self._clock() < deadline:
                await asyncio.sleep(0.01)
        result, running, now = self._result, self._running_since, self._clock()
        if result is not None and (running is None or now - running < self.wait):
            return result[1]
        waited = 0.0 if running is None else now - running
        last = "" if result is None else f"; last answer {now - result[0]:.1f} s ago: {result[1]}"
        return f"stale: no answer from the database for {waited:.1f} s{last}"

    def _start_probe(self) -> threading.Event:
        with self._lock:
            if self._running_since is None:
                self._running_since = self._clock()
                self._done = threading.Event()
                threading.Thread(target=self._probe, args=(self._done,), name="specwatch-readyz",
                                 daemon=True).start()
            return self._done

    def _probe(self, done: threading.Event) -> None:
        try:
            outcome = database_check(self.sidecar)
        except Exception as exc:  # any failure is an answer: not ready
            outcome = f"{type(exc).__name__}: {exc}"
        with self._lock:
            self._result, self._running_since = (self._clock(), outcome), None
        done.set()


def database_check(sidecar: Any) -> str:
    try:
        with sidecar.store.db.write():  # takes the write lock (SQLite) / a connection (PostgreSQL)
            pass
    except StoreError as exc:
        return str(exc)
    return "ok"


def ingest_check(sidecar: Any) -> str:
    ingest = sidecar.ingest
    if ingest is None:
        return "not configured"
    if not ingest.alive:
        return "worker stopped"
    if ingest.pending >= ingest.max_pending:
        return f"backlogged: {ingest.pending} records or batches waiting"
    return "ok"


def models_check(generator: Any) -> str:
    if generator is not None and generator.ready:
        return "ok"
    if generator is not None and generator.error:
        return generator.error
    return "loading"
