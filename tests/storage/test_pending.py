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


def test_store_compact_lets_its_caches_start_over_once_a_burst_has_gone(store):
    """After a burst of windows has gone, the store's caches start over and it still writes correctly."""
    from specwatch_core.records import StepRecord

    now = store._now(None)
    records = [StepRecord(domain=f"d{i:05d}", lookahead=2, accepted=1, emitted=2, draft_seconds=0.001,
                          verify_seconds=0.01, target_version="t", draft_version="d", timestamp=now - 20)
               for i in range(1_500)]
    store.write_records(records)
    store.flush(now)
    assert len(store._series_ids) > 0 and not store.compact()  # the burst is still held for late records
    store.flush(now + 400)  # past late_seconds: its windows go
    assert store.compact()
    assert len(store._series_ids) == 0
    store.write_records(records[:1])
    store.flush(now + 401)
    assert len(store._series_ids) == 1  # looked up again, same series
