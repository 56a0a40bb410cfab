"""Delivery to one sink on its own thread: a bounded queue where the newest state of an alert wins, and
retries with exponential back-off. A slow or failing sink never blocks the caller or the other sinks."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from alerts.alert import Alert
from alerts.config import AlertConfig
from alerts.sinks.base import RejectedError, Sink

log = logging.getLogger("specwatch.alerts")

Key = tuple[str, float]  # (fingerprint, starts_at): one occurrence of an alert


@dataclass
class DeliveryStats:
    delivered: int = 0  # alert states sent
    failures: int = 0  # failed send attempts
    rejected: int = 0  # alert states the receiver refused (dropped, not retried)
    dropped: int = 0  # alert states pushed out of a full queue


class Delivery:
    """Sends what ``submit`` hands it to ``sink``, in order, in batches of up to ``config.max_batch``.

    The queue is keyed by alert occurrence: a newer state of a queued alert replaces it and moves to the
    back, so a sink that is down for a while receives each alert's latest state once it is back. When the
    queue is full the oldest firing state goes first (the next re-send brings it back), then the oldest."""

    def __init__(self, sink: Sink, config: AlertConfig | None = None):
        self.sink = sink
        self.config = config or AlertConfig()
        self.stats = DeliveryStats()
        self._queue: OrderedDict[Key, Alert] = OrderedDict()
        self._cond = threading.Condition()
        self._busy = False  # a batch is out of the queue and being sent
        self._failures = 0  # consecutive
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"specwatch-alerts-{sink.name}", daemon=True)
        self._thread.start()

    def submit(self, alerts: Sequence[Alert]) -> None:
        """Queue alert states; returns at once."""
        if not alerts:
            return
        with self._cond:
            for alert in alerts:
                key = (alert.fingerprint, alert.starts_at)
                self._queue.pop(key, None)
                self._queue[key] = alert
            while len(self._queue) > self.config.queue_size:
                self._evict()
            self._cond.notify()

    @property
    def pending(self) -> int:
        """Alert states queued or being sent."""
        with self._cond:
            return len(self._queue) + (1 if self._busy else 0)

    @property
    def failing(self) -> bool:
        return self._failures > 0

    def wait_idle(self, timeout: float) -> bool:
        """Wait until everything queued has been sent (or refused); False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._queue or self._busy:
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive():
                    return False
                self._cond.wait(left)
            return True

    def close(self, timeout: float = 5.0) -> bool:
        """Drain for up to ``timeout`` seconds, stop the thread, close the sink; True if all was sent."""
        deadline = time.monotonic() + timeout
        drained = self.wait_idle(timeout)
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        self._thread.join(max(0.0, deadline - time.monotonic()))
        if not drained:
            log.warning("alert sink %s: %d alert states not delivered at shutdown", self.sink.name,
                        len(self._queue))
        if not self._thread.is_alive():
            self.sink.close()
        return drained

    # -- worker thread -------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stop.is_set():
                    self._cond.wait()
                if self._stop.is_set():
                    return
                batch = [self._queue.popitem(last=False) for _ in range(min(self.config.max_batch,
                                                                             len(self._queue)))]
                self._busy = True
            delay = self._send(batch)
            with self._cond:
                self._busy = False
                self._cond.notify_all()
            if delay and self._stop.wait(delay):
                return

    def _send(self, batch: list[tuple[Key, Alert]]) -> float:
        """Send one batch; return the back-off before the next attempt (0 after a success)."""
        try:
            self.sink.send([alert for _, alert in batch])
        except RejectedError as exc:
            self.stats.rejected += len(batch)
            self._failures = 0
            log.error("alert sink %s: %s; dropped %d alert states", self.sink.name, exc, len(batch))
            return 0.0
        except Exception as exc:  # any failure of a sink is retried; it must not kill the worker
            self.stats.failures += 1
            self._failures += 1
            delay = self.config.retry_delay(self._failures)
            self._requeue(batch)
            log.warning("alert sink %s failed (%s: %s); attempt %d, retrying in %.3g s", self.sink.name,
                        type(exc).__name__, exc, self._failures, delay)
            return delay
        self.stats.delivered += len(batch)
        if self._failures:
            log.info("alert sink %s recovered after %d failed attempts", self.sink.name, self._failures)
        self._failures = 0
        return 0.0

    def _requeue(self, batch: list[tuple[Key, Alert]]) -> None:
        """Put a failed batch back at the front, unless a newer state of an alert arrived meanwhile."""
        with self._cond:
            for key, alert in reversed(batch):
                if key not in self._queue:
                    self._queue[key] = alert
                    self._queue.move_to_end(key, last=False)
            while len(self._queue) > self.config.queue_size:
                self._evict()

    def _evict(self) -> None:
        victim = next((k for k, a in self._queue.items() if a.state == "firing"), None)
        if victim is None:
            victim = next(iter(self._queue))
        del self._queue[victim]
        self.stats.dropped += 1
