"""PendingWindows gives back its tables after a burst of windows has gone (compact)."""

from __future__ import annotations

import sys

from storage.counts import WindowCounts
from storage.pending import PendingWindows


def burst(pending: PendingWindows, n: int, start: int = 0) -> None:
    pending.merge({start: {("pod", f"d{i:06d}", "t", "d", 4): WindowCounts(4) for i in range(n)}})
    pending.mark_written([(start, ("pod", f"d{i:06d}", "t", "d", 4)) for i in range(n)])


def test_compact_rebuilds_the_tables_once_most_entries_are_gone_and_keeps_what_is_held():
    pending = PendingWindows()
    burst(pending, 50_000)
    burst(pending, 10, start=10)
    full = sys.getsizeof(pending._totals)
    assert not pending.compact()  # nothing has gone yet
    pending.evict_before(10)
    assert len(pending) == 10 and sys.getsizeof(pending._totals) == full  # a dict never shrinks by itself
    assert pending.compact()
    assert sys.getsizeof(pending._totals) < full / 100
    assert len(pending) == 10 and pending.unwritten_count == 0
    assert not pending.compact()  # the new peak is what is held


def test_compact_leaves_small_or_still_full_tables_alone():
    pending = PendingWindows()
    burst(pending, 500)
    pending.evict_before(10)
    assert not pending.compact()  # under the floor: not worth a rebuild
    burst(pending, 5_000, start=20)
    pending.forget([(20, ("pod", f"d{i:06d}", "t", "d", 4)) for i in range(2_000)])
    assert not pending.compact()  # 3,000 of a 5,500 peak still held
