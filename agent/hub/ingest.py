"""Ingest: one worker thread that feeds records to the data path off the decoding thread.

The decoding loop (or an HTTP handler) hands records (or validated batches) over with a deque append under
an uncontended lock, and no wake-up call (waking a thread costs tens of microseconds on a busy core). The worker looks every
``poll`` seconds (backing off to ``IDLE_POLL`` while nothing comes), takes everything waiting in one batch
and passes it to ``handle`` (validation where the caller did not, window sums, metrics, drift watch,
policy update). The worker shares the GIL with the decoder: it takes work off the decoding thread's step,
not off the process (bench/overhead_insitu.py measures both).

Nothing is dropped: above ``max_pending`` waiting items, ``put`` blocks until the worker catches up, or
with ``block=False`` (an HTTP handler, which must never wait) raises ``IngestFull`` and queues nothing.
``drain`` waits until everything put before the call has been handled (the flush and shutdown use it, so
a flush writes every record recorded before it). A batch whose handler raises is logged and counted in
``errors``; the worker goes on with the next one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

IDLE_POLL = 0.05  # seconds between looks once the inbox has stayed empty a while


class IngestFull(RuntimeError):
    """``put(block=False)`` found ``max_pending`` items waiting; the item was not queued."""


class Ingest:
    """See the module docstring. ``handle(batch)`` runs on the worker thread, one batch at a time."""

    def __init__(self, handle: Callable[[list[Any]], None], *, max_pending: int = 65_536, poll: float = 0.002,
                 name: str = "specwatch-ingest"):
        if type(max_pending) is not int or max_pending < 1:
            raise ValueError(f"max_pending must be a positive integer, got {max_pending!r}")
        if not 0 < poll <= 1:
            raise ValueError(f"poll must be in (0, 1] seconds, got {poll!r}")
        self._handle, self.max_pending, self.poll = handle, max_pending, poll
        self._inbox: deque[Any] = deque()
        self._put_lock = threading.Lock()  # many producers may put (HTTP handlers, decoding threads)
        self._submitted = 0
        self._handled = 0
        self._wake = threading.Event()
        self._done = threading.Condition()
        self._stopping = False
        self.errors = 0
        self.cpu_seconds = 0.0  # the worker's thread CPU time in ``handle`` (bench/overhead.py reports it)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # -- producers ---------------------------------------------------------------------------------------
    def put(self, item: Any, block: bool = True) -> None:
        """Queue one item for ``handle`` (``block=False``: IngestFull rather than wait for room)."""
        if self._stopping:
            raise RuntimeError("ingest is closed")
        inbox = self._inbox
        if len(inbox) >= self.max_pending:  # back-pressure, never loss
            if not block:
                raise IngestFull(f"{len(inbox)} items waiting (at most {self.max_pending})")
            self._wait_below(self.max_pending)
        with self._put_lock:
            inbox.append(item)
            self._submitted += 1

    # -- waiting -------------------------------------------------------------------------------------------
    @property
    def pending(self) -> int:
        """Items put but not yet handled."""
        return max(0, self._submitted - self._handled)

    @property
    def full(self) -> bool:
        """Whether ``put`` would wait (``block=False``: refuse) now."""
        return len(self._inbox) >= self.max_pending

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every item put before this call is handled; False if ``timeout`` passed first."""
        goal = self._submitted
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._done:
            while self._handled < goal and self._thread.is_alive():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._done.wait(left)
        return self._handled >= goal

    def _wait_below(self, limit: int) -> None:
        with self._done:
            while len(self._inbox) >= limit and self._thread.is_alive():
                self._done.wait(0.05)

    def close(self, timeout: float | None = 5.0) -> bool:
        """Handle what is queued, then stop the worker; False if it did not finish within ``timeout``."""
        drained = self.drain(timeout)
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout)
        return drained and not self._thread.is_alive()

    # -- the worker ----------------------------------------------------------------------------------------
    def _run(self) -> None:
        inbox, wake = self._inbox, self._wake
        idle = self.poll
        while True:
            if not inbox:
                if self._stopping:
                    return
                wake.wait(idle)  # set only by close()
                idle = min(idle * 2, IDLE_POLL)  # an idle sidecar wakes 20 times a second, not 500
                continue
            idle = self.poll
            batch = []
            try:
                while True:
                    batch.append(inbox.popleft())
            except IndexError:
                pass
            start = time.thread_time()
            try:
                self._handle(batch)
            except Exception:  # keep ingesting: one bad batch must not stop the data path
                self.errors += 1
                log.exception("ingest: a batch of %d items failed", len(batch))
            self.cpu_seconds += time.thread_time() - start
            handled, batch = len(batch), None  # an idle worker must not keep its last batch alive
            with self._done:
                self._handled += handled
                self._done.notify_all()
