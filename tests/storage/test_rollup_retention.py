"""Rollups equal direct aggregation; retention never deletes what the tier above does not cover; the
planner picks the coarsest tier that answers a range exactly."""

import pytest

from answers import same
from history import T0, random_steps, step
from storage import StatsQuery, Store, StoreConfig
from storage.planner import Segment
from storage.tiers import WEEK

H = 3600
ALL = ("domain", "lookahead", "pod", "target_version", "hour")


def rows(store, by=ALL, **kw):
    return store.stats(StatsQuery(by=by, until=T0 + 400 * 86400, **kw)).rows


@pytest.fixture
def history(store):
    store.write_records(random_steps(3000, T0, 3 * H, seed=1))
    store.flush(T0 + 3 * H)
    return store


def test_rollup_equals_direct_aggregation(history):
    direct = rows(history, tier="window")
    positions = rows(history, by=("domain", "position"), tier="window")
    # the day has not ended
    assert history.rollup(T0 + 3 * H) == {"minute": 180, "ten_minute": 18, "hour": 3, "day": 0, "week": 0}
    for tier in ("minute", "hour", None):
        same(rows(history, tier=tier), direct)
        same(rows(history, by=("domain", "position"), tier=tier), positions)
    # nothing changed since
    assert history.rollup(T0 + 3 * H) == {"minute": 0, "ten_minute": 0, "hour": 0, "day": 0, "week": 0}
    same(rows(history, tier="hour"), direct)
    assert history.rollup(T0 + 86400) == {"minute": 0, "ten_minute": 0, "hour": 0, "day": 1, "week": 0}
    by_day = ("domain", "lookahead", "pod", "target_version", "day")
    same(rows(history, by=by_day, tier="day"), rows(history, by=by_day, tier="window"))
    same(rows(history, by=("domain", "position"), tier="day"), positions)


def test_rollup_waits_for_the_bucket_to_end(history):
    history.rollup(T0 + H + 90)  # mid-hour: minutes up to T0 + H + 60, hours up to T0 + H
    assert rows(history, tier="hour", since=T0 + H) == []
    assert sum(r["steps"] for r in rows(history, tier="minute", since=T0 + H)) > 0
    same(rows(history), rows(history, tier="window"))  # the planner fills in from windows


def test_late_data_is_rolled_up_again(history, db_url, clock):
    history.rollup(T0 + 3 * H)
    other = Store.open(db_url, StoreConfig(pod="pod-late", max_past_seconds=400 * 86400), clock=clock,
                       backfill=True)  # another pod, flushing late
    other.write_records([step("code", 4, 3, T0 + 30 * 60)])
    other.close()
    direct = rows(history, tier="window")
    same(rows(history), direct)  # the stale hour is answered from below until the next rollup
    assert history.rollup(T0 + 3 * H) == {"minute": 1, "ten_minute": 1, "hour": 1, "day": 0, "week": 0}
    same(rows(history, tier="hour"), direct)


def test_retention_never_deletes_uncovered_rows(history, db_url, clock):
    before = rows(history, by=("domain",))
    far = T0 + 500 * 86400
    history.prune(far)  # nothing rolled up yet: nothing is covered, nothing goes
    same(rows(history, by=("domain",), tier="window"), before)
    history.rollup(T0 + 3 * H)
    other = Store.open(db_url, StoreConfig(pod="pod-late", max_past_seconds=400 * 86400), clock=clock,
                       backfill=True)
    other.write_records([step("chat", 2, 2, T0 + 2 * H + 600)])  # un-covers minute 2h10m and its hour
    other.close()
    expected = rows(history, by=("domain",), tier="window")
    history.prune(T0 + 3 * H + 8 * 86400)  # windows expired; those before the late minute are covered
    kept = history.stats(StatsQuery(by=("minute",), tier="window", until=far)).rows
    assert kept and min(r["minute"] for r in kept) == T0 + 2 * H + 600
    same(rows(history, by=("domain",)), expected)  # and the answer is unchanged
    history.rollup(T0 + 3 * H)
    history.prune(far)  # now everything is covered and expired, up to the hours' own retention
    assert rows(history, by=("domain",), tier="window") == []
    assert rows(history, by=("domain",), tier="minute") == []


def test_hours_expire_in_whole_days_the_days_tier_covers(history):
    history.rollup(T0 + 3 * H)  # the day has not ended: no day row covers the hours yet
    history.prune(T0 + 401 * 86400)
    assert len(rows(history, by=("hour",), tier="hour")) == 3
    history.rollup(T0 + 86400)
    history.prune(T0 + 401 * 86400 - 1)  # not yet a whole day older than 400 days
    assert len(rows(history, by=("hour",), tier="hour")) == 3
    history.prune(T0 + 401 * 86400)
    assert rows(history, by=("hour",), tier="hour") == []
    assert [r["day"] for r in rows(history, by=("day",))] == [T0]  # answered by the day row
    history.prune(T0 + 5 * 366 * 86400 + 86400)  # days go after their own retention, once their week covers them
    assert [r["day"] for r in rows(history, by=("day",), tier="day")] == [T0]
    week_end = T0 // WEEK * WEEK + WEEK
    history.rollup(week_end)
    history.prune(week_end + 5 * 366 * 86400)  # the week is as old: both go
    assert rows(history, by=("day",), tier="day") == [] and rows(history, by=("domain",), tier="week") == []


def test_tier_selection(history):
    history.rollup(T0 + 3 * H)

    def segments(since, until, by=("domain",)):
        return history.stats(StatsQuery(since=since, until=until, by=by)).plan.segments

    assert segments(T0, T0 + 3 * H) == (Segment("hour", T0, T0 + 3 * H),)
    # Edges mostly inside a bucket: that bucket less the finer buckets outside the range (a complement).
    assert segments(T0 + 70, T0 + 2 * H) == (Segment("minute", T0 + 70, T0 + 120, (T0 + 60, T0 + 120), "window"),
                                             Segment("ten_minute", T0 + 120, T0 + 600, (T0, T0 + 600), "minute"),
                                             Segment("hour", T0 + 600, T0 + H, (T0, T0 + H), "ten_minute"),
                                             Segment("hour", T0 + H, T0 + 2 * H))
    same(history.stats(StatsQuery(T0 + 70, T0 + 2 * H, ("domain", "lookahead"))).rows,
         history.stats(StatsQuery(T0 + 70, T0 + 2 * H, ("domain", "lookahead"), tier="window")).rows)
    assert segments(T0, T0 + 3 * H, by=("minute",)) == (Segment("minute", T0, T0 + 3 * H),)
    assert segments(T0, T0 + 3 * H, by=("day", "domain")) == (Segment("hour", T0, T0 + 3 * H),)
    history.rollup(T0 + 86400)  # the day has ended: a month is read from days
    assert segments(T0, T0 + 86400) == (Segment("day", T0, T0 + 86400),)
    assert segments(T0 - 5 * H, T0 + 86400 + 60) == (Segment("hour", T0 - 5 * H, T0),
                                                       Segment("day", T0, T0 + 86400),
                                                       Segment("minute", T0 + 86400, T0 + 86400 + 60))
    history.write_records([step(ts=T0 + 3 * H + 5)])
    history.flush(T0 + 3 * H + 60)  # a new minute, not rolled up yet
    # The hour holding it is behind; its written minute comes from windows, the rest of its ten minutes from
    # (empty) minutes, the rest of the hour from (empty) ten-minute rows.
    assert segments(T0, T0 + 4 * H) == (Segment("hour", T0, T0 + 3 * H),
                                        Segment("window", T0 + 3 * H, T0 + 3 * H + 60),
                                        Segment("minute", T0 + 3 * H + 60, T0 + 3 * H + 600),
                                        Segment("ten_minute", T0 + 3 * H + 600, T0 + 4 * H))


@pytest.mark.parametrize("by", [("pod",), ("domain", "position"), ("domain", "lookahead", "minute"), ("day", "pod")])
def test_a_complement_answers_as_the_finest_tier(history, db_url, clock, by):
    # pod-x wrote only in the first minutes of the hour: the complement (the hour less them) cancels it out.
    other = Store.open(db_url, StoreConfig(pod="pod-x", max_past_seconds=400 * 86400), clock=clock, backfill=True)
    other.write_records([step("code", 4, 3, T0 + 30), step("code", 4, 1, T0 + 200)])
    other.close()
    history.rollup(T0 + 3 * H)
    since, until = T0 + 600 + 30, T0 + 3 * H - 60
    result = history.stats(StatsQuery(since, until, by))
    assert any(s.whole for s in result.plan.segments) or "minute" in by
    direct = history.stats(StatsQuery(since, until, by, tier="window")).rows
    same(result.rows, direct)
    assert "pod-x" not in {r.get("pod") for r in result.rows}
