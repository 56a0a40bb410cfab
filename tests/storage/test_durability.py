"""Durability: bounds at the store, open windows written at every flush, a refused row dead-lettered while
the rest is stored, an unreachable database retried, history visible at once, bounded caches."""

import json

import pytest
import sqlalchemy as sa
from prometheus_client import CollectorRegistry

from alerts.metrics.store import StoreCollector
from specwatch_core.records import RecordError
from history import T0, step
from storage import StatsQuery, Store, StoreConfig

DAY = 86400


def totals(store, **query):
    rows = store.stats(StatsQuery(by=("domain",), **query)).rows
    return {r["domain"]: (r["steps"], r["drafted"], r["accepted"]) for r in rows}


def test_timestamps_outside_the_clock_skew_are_refused_naming_index_and_field(make_store, clock):
    store = make_store(max_past_seconds=7 * DAY, max_future_seconds=300)
    now = clock.now
    store.write_records([step(ts=now - 7 * DAY), step(ts=now + 300)])  # both edges are inside
    for bad in (now - 7 * DAY - 1, now + 301, 1e12, 1e300):
        with pytest.raises(RecordError, match="record 1: timestamp"):
            store.write_records([step(ts=now), step(ts=bad)])
    assert store.unwritten == 2  # only the first batch was counted


def test_open_windows_reach_the_database_at_each_flush(make_store, clock, db_url):
    clock.now = T0 + 3
    first = make_store(backfill=False)
    first.write_records([step(ts=T0 + 12), step(ts=T0 + 13, accepted=4)])  # [T0+10, T0+20) is open
    clock.now = T0 + 14
    assert first.flush() == 1 and first.unwritten == 0
    assert first.flush() == 0  # nothing changed: nothing rewritten
    first.write_records([step(ts=T0 + 14)])
    assert first.unwritten == 1 and first.flush() == 1  # the grown total replaces the partial row
    # kill -9 now: nothing more is written. A fresh store on the database sees every flushed record.
    assert totals(make_store()) == {"code": (3, 12, 8)}
    # The pod restarts inside the same window: it must not replace what the first process wrote there.
    clock.now = T0 + 15
    second = make_store(backfill=False)
    second.write_records([step(ts=T0 + 15, accepted=1)])
    second.flush()
    assert totals(second) == {"code": (4, 16, 9)} and second.late_records == 1


def test_a_restart_never_replaces_rows_stamped_ahead_of_the_clock(make_store, clock):
    clock.now = T0
    first = make_store(backfill=False)
    first.write_records([step(ts=T0 + 200)])  # ahead of the clock, inside the allowed skew
    first.flush()
    second = make_store(backfill=False)
    second.write_records([step(ts=T0 + 201, accepted=0)])
    second.flush()
    assert totals(second) == {"code": (2, 8, 2)}


def test_history_is_visible_at_once_after_a_restart(make_store, clock):
    # The reported `specwatch stats` -> []: records posted right after a start are counted in the first
    # window after it (a few seconds ahead), and a query up to "now" ended before that window.
    clock.now = T0 + 1
    store = make_store(backfill=False)
    store.write_records([step(ts=T0 + 1), step(ts=None)])
    store.close()  # SIGTERM
    reader = make_store()
    assert totals(reader) == {"code": (2, 8, 4)}
    assert reader.stats(StatsQuery(by=("minute",))).rows[0]["steps"] == 2
    assert totals(reader, until=T0 + 5) == {}  # an explicit end is still honoured
    assert sum(p.steps for p in reader.history(since=T0).acceptance["code"]) == 2  # what --plot draws


def _unreachable(db_url: str) -> sa.Engine:
    if db_url.startswith("sqlite"):
        return sa.create_engine("sqlite:////nonexistent-specwatch-dir/x.db")
    return sa.create_engine("postgresql+psycopg://postgres@127.0.0.1:1/test", connect_args={"connect_timeout": 2})


def test_a_refused_row_is_dead_lettered_and_every_good_row_stored(make_store, tmp_path, caplog):
    path = tmp_path / "dead.jsonl"
    store = make_store(dead_letter=str(path))
    good = [step(d, ts=T0 + i) for i, d in enumerate(("code", "chat", "prose", "math", "sql", "poems"))]
    store.write_records(good[:3])
    bad = step("bad", ts=1e19)  # past every column's range: only possible by bypassing validation
    store.count_validated([bad])
    store.write_records(good[3:])
    store.flush(T0 + 60)  # does not raise
    assert store.dead_lettered == 1 and store.unwritten == 0
    assert exported(store)["specwatch_store_dead_lettered_rows_total"] == 1  # on /metrics too
    assert totals(store, until=T0 + 60) == {d: (1, 4, 2) for d in ("code", "chat", "prose", "math", "sql", "poems")}
    [line] = path.read_text().splitlines()
    row = json.loads(line)
    assert (row["domain"], row["steps"], row["drafted"], row["accepted"]) == ("bad", 1, 4, 2)
    assert row["bucket_start"] == int(1e19) and row["error"]
    assert [r for r in caplog.records if "dead-lettered to " + str(path) in r.getMessage()]
    store.write_records([step("code", ts=T0 + 1)])
    assert store.flush(T0 + 60) == 1 and store.dead_lettered == 1  # the refused row is not retried


def test_an_unreachable_database_is_retried_not_dead_lettered(make_store, db_url, tmp_path):
    store = make_store(dead_letter=str(tmp_path / "dead.jsonl"))
    store.write_records([step(ts=T0), step("chat", ts=T0 + 30)])
    real = store.db.engine
    store.db.engine = _unreachable(db_url)
    with pytest.raises(Exception):
        store.flush(T0 + 60)
    assert store.dead_lettered == 0 and store.unwritten == 2 and not (tmp_path / "dead.jsonl").exists()
    assert {k: v for k, v in exported(store).items() if "failures" in k or "unwritten" in k} == {
        "specwatch_store_flush_failures_total": 1, "specwatch_store_unwritten_rows": 2}
    store.db.engine.dispose()
    store.db.engine = real
    assert store.flush(T0 + 60) == 2
    assert totals(store, until=T0 + 60) == {"code": (1, 4, 2), "chat": (1, 4, 2)}


def test_caches_stay_bounded_with_many_domains(make_store):
    store = make_store(max_series_cached=50, max_windows_kept=80)
    for batch in range(10):
        store.write_records([step(f"d{batch}-{i}", ts=T0 + batch * 10 + i % 10) for i in range(40)])
        store.flush(T0 + batch * 10 + 5)
        assert len(store._series_ids) <= 50 and len(store._pending) <= 80
    # A late record for a window whose total was dropped is counted later, never over the stored total.
    store.write_records([step("d0-0", ts=T0)])
    store.flush(T0 + 200)
    rows = totals(store, until=T0 + 400)
    assert len(rows) == 400 and rows["d0-0"] == (2, 8, 4) and store.late_records == 1
    assert sum(n for n, _, _ in rows.values()) == 401


def exported(store) -> dict[str, float]:
    """The store's counts as /metrics shows them (alerts/metrics/store.py on a fresh registry)."""
    registry = CollectorRegistry()
    registry.register(StoreCollector(store))
    return {s.name: s.value for m in registry.collect() for s in m.samples if not s.name.endswith("_created")}
