"""The in-memory window aggregator: the hot path adds a step record to per-window sums; no I/O.

Windows are keyed by their start (unix seconds, a multiple of the window length) and then by series.
Taking the closed windows pops whole window starts, so a flush holds the lock for a few dict operations.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from specwatch_core.records import StepRecord, verify_seconds_of
from storage.counts import SeriesKey, WindowCounts

Windows = dict[int, dict[SeriesKey, WindowCounts]]


class WindowAggregator:
    """Adds records to the sums of their window; safe to call from one thread while another takes."""

    def __init__(self, window_seconds: int, pod: str, clock: Callable[[], float] = time.time):
        self.window_seconds = window_seconds
        self.pod = pod
        self._clock = clock
        self._lock = threading.Lock()
        self._windows: Windows = {}
        self._floor = 0  # earliest window start still open to records; set by hold_from()
        self.late = 0  # records counted in a later window than their timestamp because theirs was gone

    def add(self, record: StepRecord) -> None:
        with self._lock:
            self._count(record)

    def add_many(self, records: Iterable[StepRecord]) -> None:
        with self._lock:
            for record in records:
                self._count(record)

    def _count(self, r: StepRecord) -> None:
        ts = r.timestamp
        start = int(self._clock() if ts is None else ts)
        start -= start % self.window_seconds
        if start < self._floor:
            start = self._floor
            self.late += 1
        bucket = self._windows.get(start)
        if bucket is None:
            bucket = self._windows[start] = {}
        key = (r.pod or self.pod, r.domain, r.target_version, r.draft_version, r.lookahead)
        c = bucket.get(key)
        if c is None:
            c = bucket[key] = WindowCounts(r.lookahead)
        k, a, steps, drafted = r.lookahead, r.accepted, r.steps, r.drafted
        c.emitted += r.emitted
        c.accepted += a
        c.draft_seconds += r.draft_seconds
        c.verify_seconds += verify_seconds_of(r)
        if steps == 1 and (drafted is None or drafted == k):  # a per-step record: its positions are known
            c.steps += 1
            c.drafted += k
            c.hist[a] += 1
        else:  # an aggregate (records.is_aggregate): sums only
            c.steps += steps
            c.drafted += k * steps if drafted is None else drafted
        expected = r.expected_acceptance
        if expected:
            c.expected_sum += sum(expected)
            c.expected_n += len(expected)

    def take_closed(self, now: float) -> Windows:
        """Remove and return every window that ended at or before ``now``."""
        with self._lock:
            closed = [s for s in self._windows if s + self.window_seconds <= now]
            return {s: self._windows.pop(s) for s in closed}

    def take_all(self) -> Windows:
        """Remove and return every window, open or not (shutdown)."""
        with self._lock:
            taken, self._windows = self._windows, {}
            return taken

    def hold_from(self, start: int) -> int:
        """Records older than ``start`` are counted in the window that starts there (late records).
        Returns the window start now in force (the floor only rises)."""
        start -= start % self.window_seconds
        with self._lock:
            self._floor = max(self._floor, start)
            return self._floor

    def open_windows(self) -> int:
        with self._lock:
            return sum(len(b) for b in self._windows.values())
