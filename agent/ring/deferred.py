"""DeferredRingClient: a RingClient whose ``record`` only queues the step; a thread of the decoding process packs
the queue into the step ring, mostly while the decoding thread is inside the models' forward passes (torch
releases the GIL there).

Why: on a CPU engine the forward passes leave the caches cold, and packing a step right after them costs the
decoding thread far more than it does warm (bench/overhead_insitu.py: about 29 us per step against 2.3 us in
bench/overhead.py's warm loop). Queued, the decoding thread pays a deque append and ``decide``'s read of the
ring; the packing (a few us per step) moves to the packer thread, the sidecar's work stays in its own process.
It is cheaper on the decoding thread in bench/overhead.py's warm loop too; the plain RingClient remains for
engines that need a refused record raised at the call, or that may not run another thread.

What changes against RingClient: a record the ring cannot carry is refused by the packer thread, not at the
call. It is logged with the field it names and counted in ``rejected``; the records around it go on (as with
the Sidecar's background ingest). A queue over ``max_queued`` steps (the packer stalled behind a full ring)
drops the step at once and counts it in ``queue_dropped``; the ring's header carries ``dropped`` (ring full)
plus ``queue_dropped`` to the sidecar's metrics. Nothing here makes the decoding thread wait.
"""

from __future__ import annotations

import collections
import logging
import threading
import time

from agent.ring import layout as rl
from agent.ring.client import RingClient
from specwatch_core.records import RecordError, StepRecord

log = logging.getLogger(__name__)


class DeferredRingClient(RingClient):
    """See the module docstring. ``poll``: how long the packer thread sleeps when the queue is empty; the
    other arguments are RingClient's."""

    def __init__(self, name: str = "specwatch", *, poll: float = 0.002, max_queued: int | None = None, **kwargs):
        if not poll > 0:
            raise ValueError(f"poll: must be > 0 seconds, got {poll!r}")
        super().__init__(name, **kwargs)
        self.poll = poll
        self.max_queued = 65_536 if max_queued is None else max_queued
        if type(self.max_queued) is not int or self.max_queued < 1:
            raise ValueError(f"max_queued: a positive integer, got {max_queued!r}")
        self.rejected = 0
        self.queue_dropped = 0  # written by the decoding thread only
        self._published = 0  # queue_dropped as last written to the ring's header
        self.cpu_seconds = 0.0  # the packer thread's CPU time
        self._queue: collections.deque[StepRecord] = collections.deque()
        self._busy = False  # the packer is inside a batch (steps taken from the queue, not yet in the ring)
        self._stopping = threading.Event()
        self._running = True
        self._packer = threading.Thread(target=self._pack, name=f"specwatch-ring-packer-{name}", daemon=True)
        self._packer.start()

    def record(self, step: StepRecord) -> None:
        """Queue one step for the packer thread (see the module docstring for refusals and drops)."""
        queue = self._queue
        if len(queue) < self.max_queued and self._running:
            queue.append(step)
        else:
            self._refuse()

    def _refuse(self) -> None:
        if not self._running:
            raise RuntimeError(f"step ring {self.name!r} is closed")
        self.queue_dropped += 1  # the packer writes it to the header: no lock taken on the decoding thread
        if self.queue_dropped == 1 or self.queue_dropped % 10_000 == 0:
            log.warning("step ring %r: %d queued steps and the packer is behind: %d step(s) dropped", self.name,
                        len(self._queue), self.queue_dropped)

    def _publish_dropped(self) -> None:
        """Ring drops plus queue drops in the ring's header (the packer thread, under the ring's lock)."""
        self._published = self.queue_dropped
        rl.U64.pack_into(self.buf, rl.DROPPED, self.dropped + self._published)

    def _pack(self) -> None:
        queue, put = self._queue, super().record
        while True:
            if self.queue_dropped != self._published:
                with self._lock:
                    self._publish_dropped()
            if not queue:
                if self._stopping.is_set():
                    return
                self._stopping.wait(self.poll)
                continue
            began = time.thread_time()
            self._busy = True
            try:
                while queue:
                    step = queue.popleft()
                    try:
                        put(step)
                    except Exception as exc:  # RecordError names the field; anything else: not a StepRecord
                        self.rejected += 1
                        why = exc if isinstance(exc, RecordError) else f"not a StepRecord: {exc!r}"
                        log.warning("step ring %r: record refused (%s); %d refused so far", self.name, why,
                                    self.rejected)
            finally:
                self._busy = False
                self.cpu_seconds += time.thread_time() - began

    @property
    def pending(self) -> int:
        """Steps queued or written that the sidecar has not read yet."""
        return len(self._queue) + super().pending

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every queued step is in the ring; False if ``timeout`` passed first."""
        deadline = time.monotonic() + timeout
        while self._queue or self._busy:  # in this order: a batch takes steps from the queue while busy
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.001)
        return True

    def drain(self, timeout: float = 5.0) -> bool:
        """Wait until every queued step is in the ring and the sidecar has read it; False on ``timeout``."""
        deadline = time.monotonic() + timeout
        return self.flush(timeout) and super().drain(max(0.0, deadline - time.monotonic()))

    def close(self) -> None:
        """Pack what is queued, stop the packer, then release and remove the ring."""
        if self._running:
            self._running = False
            self._stopping.set()
            self._packer.join()
        super().close()
