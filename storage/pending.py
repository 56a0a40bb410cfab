"""Closed windows between the aggregator and the database, kept as running totals.

Open windows come here on every flush too, so the database holds their totals so far within a flush
interval (bounded loss on a crash). A window stays here for ``late_seconds`` after it closes. Records
that arrive late for it are merged in, and the whole total is written again: the store replaces stored totals, never adds to them, so writing a
window twice (a retry, or a late record) stores the same or a larger total and never double counts.
"""

from __future__ import annotations

from storage.aggregator import Windows
from storage.counts import SeriesKey, WindowCounts

Entry = tuple[int, SeriesKey]  # window start, series


class PendingWindows:
    """Running totals of recently closed windows, and which of them the database has not seen yet."""

    def __init__(self) -> None:
        self._totals: dict[Entry, WindowCounts] = {}
        self._unwritten: set[Entry] = set()
        self._peak = 0  # entries held at most since the containers were last rebuilt

    def merge(self, closed: Windows) -> None:
        for start, series in closed.items():
            for key, counts in series.items():
                entry = (start, key)
                old = self._totals.get(entry)
                self._totals[entry] = counts if old is None else old.merged(counts)
                self._unwritten.add(entry)
        self._peak = max(self._peak, len(self._totals))

    def compact(self, least: int = 1024) -> bool:
        """Rebuild the containers once they hold under half of their peak (at least ``least`` entries ago):
        Python's dicts and sets never shrink their tables as entries go, so after a burst of windows the
        empty tables would stay. True if rebuilt."""
        if self._peak < least or len(self._totals) * 2 > self._peak:
            return False
        self._totals, self._unwritten = dict(self._totals), set(self._unwritten)
        self._peak = len(self._totals)
        return True

    def move_before(self, start: int) -> int:
        """Merge the totals of windows that started before ``start`` into the window that starts there (a
        store that learned late where its pod's predecessor stopped: those windows may be stored already, and
        a flush replaces totals). Returns entries moved."""
        moved = [e for e in self._totals if e[0] < start]
        for entry in moved:
            counts = self._totals.pop(entry)
            self._unwritten.discard(entry)
            self.merge({start: {entry[1]: counts}})
        return len(moved)

    def unwritten(self) -> list[tuple[int, SeriesKey, WindowCounts]]:
        return [(s, k, self._totals[(s, k)]) for s, k in sorted(self._unwritten)]

    def mark_written(self, entries: list[Entry]) -> None:
        self._unwritten.difference_update(entries)

    def forget(self, entries: list[Entry]) -> None:
        """Drop entries entirely (rows the database refused: their totals are not to be added to)."""
        for entry in entries:
            self._totals.pop(entry, None)
            self._unwritten.discard(entry)

    def evict_over(self, keep: int) -> int | None:
        """Forget the oldest written entries beyond ``keep``; return the start of the newest window that lost
        an entry (records for it or older must count later, or they would replace its stored total)."""
        extra = len(self._totals) - keep
        if extra <= 0:
            return None
        gone = sorted(e for e in self._totals if e not in self._unwritten)[:extra]
        for entry in gone:
            del self._totals[entry]
        return gone[-1][0] if gone else None

    @property
    def unwritten_count(self) -> int:
        return len(self._unwritten)

    def evict_before(self, start: int) -> None:
        """Forget written windows that started before ``start``; unwritten ones stay until written."""
        for entry in [e for e in self._totals if e[0] < start and e not in self._unwritten]:
            del self._totals[entry]

    def __len__(self) -> int:
        return len(self._totals)
