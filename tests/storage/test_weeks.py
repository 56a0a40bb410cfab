"""The weeks tier (schema 0009): rolled up from days once a week has ended, read by the planner for the
whole weeks of a range (and as a complement at an edge mostly inside a week), answering what the windows
answer; the migration builds the weeks the days already hold and the rollup the rest."""

import pytest
import sqlalchemy as sa

from answers import same
from history import T0, random_steps
from storage import StatsQuery, Store, StoreConfig, migrate
from storage.engine import Database
from storage.tiers import WEEK

DAY = 86400
SPAN = 40 * DAY
FLEET = ("domain", "lookahead", "pod", "target_version")


def _forty_days(db_url, clock, steps: int, seed: int) -> Store:
    """A store holding ``steps`` random steps over 40 days from T0, flushed and rolled up at their end."""
    clock.now = T0 + SPAN + 60
    store = Store.open(db_url, StoreConfig(max_past_seconds=400 * DAY), clock=clock, backfill=True)
    store.write_records(random_steps(steps, T0, SPAN, seed=seed))
    store.flush(T0 + SPAN)
    store.rollup(T0 + SPAN + 60)
    return store


@pytest.fixture
def weeks_of_history(db_url, clock):
    store = _forty_days(db_url, clock, 4000, seed=7)
    yield store
    store.close(flush=False)


def _answer(store, since, until, by=FLEET, tier=None):
    return store.stats(StatsQuery(since=since, until=until, by=by, tier=tier))


def test_ended_weeks_are_rolled_up_and_read_for_a_month(weeks_of_history):
    store = weeks_of_history
    first_week = -(-T0 // WEEK) * WEEK
    rolled = store.stats(StatsQuery(since=first_week, until=first_week + WEEK, by=FLEET, tier="week"))
    same(rolled.rows, _answer(store, first_week, first_week + WEEK, tier="window").rows)
    for since, until in ((T0 + 3 * DAY + 5, T0 + SPAN - 7), (T0 + DAY + 3600, T0 + 33 * DAY + 1800)):
        got = _answer(store, since, until)
        assert got.plan.tiers_used().get("week", 0) >= 3 * WEEK, got.plan.tiers_used()
        assert got.plan.exact
        same(got.rows, _answer(store, since, until, tier="window").rows)
        positions = ("domain", "position")
        same(_answer(store, since, until, by=positions).rows, _answer(store, since, until, positions, "window").rows)


def test_an_edge_mostly_inside_a_week_is_that_week_less_its_days_outside(weeks_of_history):
    store = weeks_of_history
    week = -(-T0 // WEEK) * WEEK
    since = week + DAY + 600  # six days and a bit of the first whole week: the week less a day (and a bit)
    got = _answer(store, since, week + 3 * WEEK)
    assert any(s.tier == "week" and s.whole == (week, week + WEEK) for s in got.plan.segments)
    same(got.rows, _answer(store, since, week + 3 * WEEK, tier="window").rows)


def test_a_week_is_not_rolled_up_before_it_ends(weeks_of_history):
    store = weeks_of_history
    current = (T0 + SPAN) // WEEK * WEEK
    assert store.stats(StatsQuery(since=current, until=current + WEEK, by=FLEET, tier="week")).rows == []
    assert store.rollup(current + WEEK)["week"] == 1
    same(_answer(store, current, current + WEEK, tier="week").rows,
         _answer(store, current, current + WEEK, tier="window").rows)


def test_upgrading_builds_the_weeks_the_days_hold_and_marks_the_current_one(db_url, clock):
    store = _forty_days(db_url, clock, 3000, seed=3)
    expected = _answer(store, T0, T0 + SPAN, tier="window").rows
    store.close(flush=False)
    db = Database.open(db_url)
    try:
        migrate.downgrade(db, "0008")
        assert "weeks" not in sa.inspect(db.engine).get_table_names()
        migrate.upgrade(db)
        with db.engine.connect() as conn:
            built = conn.execute(sa.text("SELECT count(DISTINCT bucket_start) FROM weeks")).scalar()
            marks = conn.execute(sa.text("SELECT bucket_start FROM dirty WHERE tier = 'week'")).scalars().all()
    finally:
        db.dispose()
    first, current = T0 // WEEK * WEEK, (T0 + SPAN) // WEEK * WEEK  # nothing pruned: the days are complete
    assert built == (current - first) // WEEK  # every ended week the days hold, the current one not yet
    assert marks == [current]
    store = Store.open(db_url, StoreConfig(max_past_seconds=400 * DAY), clock=clock)
    got = _answer(store, T0, T0 + SPAN)
    assert got.plan.tiers_used().get("week", 0) >= 4 * WEEK
    same(got.rows, expected)
    store.close(flush=False)
