"""Ingest: one worker thread that feeds validated records to the data path off the decoding thread.

The decoding loop (or an HTTP handler) validates a record where it is made, so a bad one is still refused
at once with the field named, then hands it over here with a deque append. The worker takes everything
waiting in one batch and passes it to ``handle`` (window sums, metrics, drift watch, policy update). The
decoder's forward passes release the GIL, so on a multi-core machine that work runs beside decoding
rather than in its way.

Nothing is dropped: above ``max_pending`` waiting records, ``put`` blocks until the worker catches up.
``drain`` waits until everything put before the call has been handled (the flush and shutdown use it, so
a flush writes every record recorded before it). A batch whose handler raises is logged and counted in
``errors``; the worker goes on with the next one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

log = logging.getLogger(__name__)


class Ingest:
    """See the module docstring. ``handle(batch)`` runs on the worker thread, one batch at a time."""

    def __init__(self, handle: Callable[[list[Any]], None], *, max_pending: int = 65_536,
                 name: str = "specwatch-ingest"):
        if type(max_pending) is not int or max_pending < 1:
            raise ValueError(f"max_pending must be a positive integer, got {max_pending!r}")
        self._handle, self.max_pending = handle, max_pending
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
    def put(self, item: Any) -> None:
        """Queue one item (already validated)."""
        self._enqueue(item)

    def put_many(self, items: Sequence[Any]) -> None:
        """Queue a batch in order (already validated as a whole)."""
        for item in items:
            self._enqueue(item)

    def _enqueue(self, item: Any) -> None:
        if self._stopping:
            raise RuntimeError("ingest is closed")
        inbox = self._inbox
        if len(inbox) >= self.max_pending:  # back-pressure, never loss
            self._wait_below(self.max_pending)
        with self._put_lock:
            inbox.append(item)
            self._submitted += 1
        if not self._wake.is_set():
            self._wake.set()

    # -- waiting -------------------------------------------------------------------------------------------
    @property
    def pending(self) -> int:
        """Items put but not yet handled."""
        return max(0, self._submitted - self._handled)

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
        while True:
            if not inbox:
                if self._stopping:
                    return
                wake.clear()
                if not inbox:  # an item put between the check and the clear set the event again
                    wake.wait(0.5)
                continue
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
                log.exception("ingest: a batch of %d records failed", len(batch))
            self.cpu_seconds += time.thread_time() - start
            with self._done:
                self._handled += len(batch)
                self._done.notify_all()
