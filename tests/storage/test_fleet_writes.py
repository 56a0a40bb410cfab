"""Many pods writing to one database: dirty marks per shard, so flushes of one minute do not queue on
one row, and the rollup still sees every pod's writes."""

import pytest
import sqlalchemy as sa

from history import T0, step
from storage import StatsQuery, Store, StoreConfig
from storage.counts import WindowCounts
from storage.engine import Timeouts
from storage.writer import shard_of, write_windows

PODS = [f"pod-{i:04d}" for i in range(50)]


def marks(store):
    with store.db.read() as conn:
        return sorted(conn.execute(sa.text("SELECT tier, bucket_start, shard FROM dirty")).all())


def test_pods_mark_their_own_shard_and_the_rollup_clears_them_all(make_store):
    a = PODS[0]
    b = next(p for p in PODS if shard_of(p) != shard_of(a))
    store = make_store(pod=a)
    for pod in (a, b):
        store.write_records([step(ts=T0 + 5, pod=pod)])
        store.flush(T0 + 10)
    assert marks(store) == sorted([("minute", T0, shard_of(a)), ("minute", T0, shard_of(b))])
    assert store.rollup(T0 + 60)["minute"] == 1  # one bucket, rebuilt once from both pods' windows
    assert marks(store) == [("ten_minute", T0, 0)]
    by_pod = store.stats(StatsQuery(since=T0, until=T0 + 60, by=("pod",), tier="minute")).rows
    assert [(r["pod"], r["steps"]) for r in by_pod] == [(a, 1), (b, 1)]


def test_an_open_flush_does_not_hold_up_pods_of_other_shards(db_url, make_store, clock):
    if not db_url.startswith("postgresql"):
        pytest.skip("row locks between concurrent writers: PostgreSQL (SQLite has one writer at a time)")
    a = PODS[0]
    b = next(p for p in PODS if shard_of(p) != shard_of(a))
    holder = make_store(pod=a)
    other = Store.open(db_url, StoreConfig(pod=b, max_past_seconds=400 * 86400), clock=clock, backfill=True,
                       timeouts=Timeouts(statement=2.0))
    try:
        other.write_records([step(ts=T0 + 5)])
        counts = WindowCounts(4, steps=1, emitted=3, drafted=4, accepted=2)
        counts.hist[2] = 1
        with holder.db.write() as conn:  # pod a's flush of the same minute, not committed yet
            write_windows(conn, [(T0, (a, "code", "t1", "d1", 4), counts)], 10, {})
            assert other.flush(T0 + 10) == 1  # with one mark per minute: waits on a's row, times out
    finally:
        other.close(flush=False)
