"""Packing ended hours into blocks changes no answer: stats at every grain, per position, rollups of late
data and the history read the same before and after; retention removes whole blocks (on PostgreSQL, whole
day partitions) and only those the tier above covers."""

import pytest
import sqlalchemy as sa

import answers
from history import T0, random_steps, step
from storage import StatsQuery, Store, StoreConfig, schema

H, DAY = 3600, 86400


def rows(store, by, **kw):
    return store.stats(StatsQuery(by=by, **{"until": T0 + 400 * DAY, **kw})).rows


def same(a, b):
    # Sums of seconds are kept to 1e-7 s in a block; these steps take as little as 1e-5 s (counts, compared
    # exactly, catch a bucket lost or counted twice).
    answers.same(a, b, rel=1e-3, abs=1e-7)


def count(store, table):
    with store.db.read() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(table)).scalar()


QUERIES = [(("domain", "lookahead", "pod", "minute"), "window"), (("domain", "10s"), "window"),
           (("domain", "position"), "window"), (("pod", "minute"), "minute"), (("domain", "position"), "minute"),
           (("domain", "hour"), "ten_minute"), (("pod", "position"), "ten_minute"),
           (("domain", "hour"), None), (("target_version", "5m"), None), (("domain",), None)]


@pytest.fixture
def packed(store):
    store.write_records(random_steps(3000, T0, 3 * H, seed=7))
    store.flush(T0 + 3 * H)
    store.rollup(T0 + 3 * H + 600)
    before = [rows(store, by, tier=tier) for by, tier in QUERIES]
    # 36 series (3 domains x K 0, 2, 4 x 2 pods x 2 targets) an hour; the last hour ended too recently
    assert store.pack(T0 + 3 * H + 100) == {"window": 72, "minute": 72, "ten_minute": 72}
    assert store.pack(T0 + 4 * H) == {"window": 36, "minute": 36, "ten_minute": 36}
    return store, before


def test_packed_hours_answer_as_rows_did(packed):
    store, before = packed
    assert count(store, schema.windows) == count(store, schema.minutes) == count(store, schema.ten_minutes) == 0
    assert count(store, schema.window_blocks) == count(store, schema.ten_minute_blocks) == 108
    for (by, tier), expected in zip(QUERIES, before):
        same(rows(store, by, tier=tier), expected)
    assert store.pack(T0 + 4 * H) == {"window": 0, "minute": 0, "ten_minute": 0}  # nothing left to pack


def test_a_late_row_for_a_packed_hour_wins_and_is_rolled_up(packed, db_url, clock):
    store, _ = packed
    other = Store.open(db_url, StoreConfig(pod="pod-late", max_past_seconds=400 * DAY), clock=clock,
                       backfill=True)
    other.write_records([step("code", 4, 3, T0 + 30 * 60 + 1), step("code", 4, 1, T0 + 30 * 60 + 2)])
    other.close()
    direct = rows(store, ("domain", "pod", "minute"), tier="window")
    assert {r["pod"] for r in direct} == {"pod-a", "pod-b", "pod-late"}
    # from blocks and the row
    assert store.rollup(T0 + 4 * H) == {"minute": 1, "ten_minute": 1, "hour": 1, "day": 0, "week": 0}
    same(rows(store, ("domain", "pod", "minute"), tier="minute"), direct)
    same(rows(store, ("domain", "pod", "hour"), tier="hour"), rows(store, ("domain", "pod", "hour"), tier="window"))
    rebuilt = count(store, schema.minutes)  # every series' row of that minute, rebuilt beside its block
    tens = count(store, schema.ten_minutes)  # and of its ten minutes
    assert rebuilt > 1 and tens >= rebuilt
    # the late pod's window block, and those
    assert store.pack(T0 + 4 * H) == {"window": 1, "minute": rebuilt, "ten_minute": tens}
    assert count(store, schema.windows) == count(store, schema.ten_minutes) == 0
    same(rows(store, ("domain", "pod", "minute"), tier="window"), direct)
    same(rows(store, ("domain", "pod", "hour"), tier="ten_minute"), rows(store, ("domain", "pod", "hour"), tier="window"))


def test_a_rewritten_bucket_replaces_the_blocks_bucket(packed):
    store, _ = packed
    t = T0 + 45 * 60
    old = rows(store, ("pod",), tier="window", since=t, until=t + 10)
    with store.db.write() as conn:  # a replay of a fuller total for a window already packed
        sid = conn.execute(sa.select(schema.series.c.id).where(schema.series.c.pod == "pod-a")).scalars().first()
        conn.execute(sa.insert(schema.windows), [dict(
            bucket_start=t, series_id=sid, steps=1000, drafted=0, accepted=0, emitted=1000, expected_n=0,
            expected_sum=0.0, draft_seconds=0.0, verify_seconds=1.0)])
    new = {r["pod"]: r["steps"] for r in rows(store, ("pod",), tier="window", since=t, until=t + 10)}
    assert new["pod-a"] >= 1000 and new["pod-a"] != {r["pod"]: r["steps"] for r in old}.get("pod-a")
    store.pack(T0 + 4 * H)
    assert {r["pod"]: r["steps"] for r in rows(store, ("pod",), tier="window", since=t, until=t + 10)} == new


def test_history_reads_packed_hours(packed):
    store, _ = packed
    history = store.history(T0, T0 + 3 * H)
    assert history.acceptance and all(len(points) > 10 for points in history.acceptance.values())


def test_retention_removes_whole_blocks_the_tier_above_covers(packed):
    store, _ = packed
    total = rows(store, ("domain",))
    far = T0 + 8 * DAY
    store.rollup(far)  # the day is over: its minutes, hours and the day itself rolled up
    store.prune(far)  # windows expired and covered by minutes: their blocks go, in whole days on PostgreSQL
    assert count(store, schema.window_blocks) == 0
    assert count(store, schema.minute_blocks) == 108  # minutes are kept 30 days
    same(rows(store, ("domain",)), total)
    if store.db.dialect == "postgresql":
        with store.db.read() as conn:
            names = set(sa.inspect(conn).get_table_names())
        assert f"window_blocks_p{T0}" not in names and f"minute_blocks_p{T0}" in names
    store.prune(T0 + 31 * DAY)
    assert count(store, schema.minute_blocks) == 0
    same(rows(store, ("domain",)), total)  # from the hours


def test_blocks_of_an_hour_the_tier_above_does_not_cover_are_kept(store):
    store.write_records(random_steps(300, T0, H, seed=2))
    store.flush(T0 + H)
    store.rollup(T0 + 2 * DAY)  # rolled up to the day: without the mark below, the blocks would go
    store.pack(T0 + 2 * DAY)
    assert count(store, schema.minute_blocks) > 0
    with store.db.write() as conn:  # the ten minutes above them are behind again (a late row elsewhere)
        conn.execute(sa.insert(schema.dirty), [dict(tier="ten_minute", bucket_start=T0, shard=0, changes=1)])
    store.prune(T0 + 40 * DAY)
    assert count(store, schema.minute_blocks) > 0


@pytest.mark.parametrize("by", [("domain", "lookahead"), ("pod", "position")])
def test_a_complement_over_packed_hours_answers_as_windows_do(packed, by):
    # The first hour less its first ten minutes, both packed: the subtracted part is summed from blocks.
    store, _ = packed
    since, until = T0 + 10 * 60 + 30, T0 + 2 * H
    result = store.stats(StatsQuery(since, until, by))
    assert any(s.whole for s in result.plan.segments)
    same(result.rows, store.stats(StatsQuery(since, until, by, tier="window")).rows)
