"""A store whose database is away: opened without it (``wait=False``) it counts records and reaches the
database at a later flush, without replacing what this pod's predecessor stored; at most ``max_unwritten``
rows are held (the oldest beyond go to the dead-letter file); at shutdown ``spill`` hands every unwritten row
to the dead-letter file, open windows included, instead of dropping them."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from history import T0, step
from storage import StatsQuery, Store, StoreConfig, StoreError

NOWHERE = {"sqlite": "sqlite:////nonexistent-specwatch-dir/x.db",
           "postgresql": "postgresql+psycopg://postgres@127.0.0.1:1/test"}


def totals(store, until=T0 + 86400) -> dict[str, int]:
    return {r["domain"]: r["steps"] for r in store.stats(StatsQuery(by=("domain",), until=until)).rows}


def away(store, db_url: str) -> sa.Engine:
    """Point the store at a database that refuses connections; returns the real engine."""
    real = store.db.engine
    store.db.engine = sa.create_engine(NOWHERE[db_url.split(":")[0].split("+")[0]],
                                       connect_args={} if db_url.startswith("sqlite") else {"connect_timeout": 2})
    return real


def back(store, real: sa.Engine) -> None:
    store.db.engine.dispose()
    store.db.engine = real


def dead_rows(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_store_opened_without_its_database_counts_records_and_writes_them_once_it_answers(db_url, clock, tmp_path):
    clock.now = T0 + 3
    first = Store.open(db_url, StoreConfig(), clock=clock, backfill=False)
    first.write_records([step(ts=T0 + 2), step(ts=T0 + 45)])  # its predecessor stored up to [T0+40, T0+50)
    first.flush()
    first.db.dispose()
    # Opening without the database does not touch it: a bad host or port costs nothing at start.
    nowhere = Store.open(NOWHERE[db_url.split(":")[0].split("+")[0]], wait=False)
    assert not nowhere.ready and nowhere.unwritten == 0
    second = Store.open(db_url, StoreConfig(), clock=clock, backfill=False, wait=False)
    real = away(second, db_url)
    second.write_records([step(ts=T0 + 4, accepted=1), step("chat", ts=T0 + 5)])
    with pytest.raises(StoreError):
        second.flush()
    assert not second.ready and second.flush_failures == 1 and second.unwritten == 2
    back(second, real)
    assert second.flush() == 2 and second.ready
    # Both went after the windows the predecessor had written (a flush replaces totals): nothing replaced.
    assert totals(second) == {"code": 3, "chat": 1}
    assert second.stats(StatsQuery(by=("domain",), until=T0 + 50)).rows[0]["steps"] == 2  # as before
    second.db.dispose()


def test_work_that_needs_the_history_waits_for_the_database(db_url, clock):
    store = Store.open(db_url, StoreConfig(), clock=clock, wait=False)
    ran = []
    store.when_ready(lambda: ran.append(totals(store)))
    assert ran == []
    store.flush()
    assert ran == [{}]
    store.when_ready(lambda: ran.append("at once"))
    assert ran[-1] == "at once"
    store.db.dispose()


def test_more_unwritten_rows_than_the_bound_send_the_oldest_to_the_dead_letter_file(db_url, clock, tmp_path):
    path = tmp_path / "dead.jsonl"
    store = Store.open(db_url, StoreConfig(max_unwritten=3, dead_letter=str(path), max_past_seconds=400 * 86400),
                       clock=clock, backfill=True)
    real = away(store, db_url)
    store.write_records([step(f"d{i}", ts=T0 + 10 * i) for i in range(5)])
    with pytest.raises(StoreError):
        store.flush(T0 + 60)
    assert store.unwritten == 3 and store.spilled == 2 and store.flush_failures == 1
    rows = dead_rows(path)
    assert [(r["domain"], r["reason"], r["steps"]) for r in rows] == [("d0", "unwritten", 1), ("d1", "unwritten", 1)]
    assert "max_unwritten" in rows[0]["error"]
    store.write_records([step("d0", ts=T0 + 1)])  # a late record for a spilled window counts after it
    back(store, real)
    store.flush(T0 + 60)
    assert totals(store) == {"d0": 1, "d2": 1, "d3": 1, "d4": 1}
    assert store.stats(StatsQuery(by=("domain",), until=T0 + 10)).rows == []  # not over d0's spilled window
    store.db.dispose()


def test_spill_hands_every_unwritten_row_to_the_dead_letter_file_open_windows_too(db_url, clock, tmp_path):
    path = tmp_path / "dead.jsonl"
    store = Store.open(db_url, StoreConfig(dead_letter=str(path), max_past_seconds=400 * 86400), clock=clock,
                       backfill=True)
    store.write_records([step(ts=T0), step(ts=T0 + 1)])
    store.flush(T0 + 60)  # written: not spilled
    real = away(store, db_url)
    store.write_records([step(ts=T0 + 2, accepted=4), step("chat", ts=clock.now)])  # an open window too
    assert store.spill("the database did not answer at shutdown") == 2
    assert store.unwritten == 0 and store.spilled == 2 and store.lost == 0
    rows = dead_rows(path)
    assert sorted((r["domain"], r["steps"], r["accepted"]) for r in rows) == [("chat", 1, 2), ("code", 3, 8)]
    assert {r["reason"] for r in rows} == {"unwritten"} and "at shutdown" in rows[0]["error"]
    back(store, real)
    assert totals(store) == {"code": 2}  # the file holds the whole total of the window: the same or more
    store.db.dispose()


def test_a_spill_the_file_cannot_take_is_counted_lost_and_logged_row_by_row(db_url, clock, tmp_path, caplog):
    store = Store.open(db_url, StoreConfig(dead_letter=str(tmp_path), max_past_seconds=400 * 86400),  # a folder
                       clock=clock, backfill=True)
    store.write_records([step(ts=T0)])
    assert store.spill("test") == 1 and store.lost == 1 and store.spilled == 0
    assert "LOST" in caplog.text and '"domain": "code"' in caplog.text
    store.db.dispose()


def test_replay_adds_the_unwritten_rows_back_once_and_leaves_refused_ones_out(db_url, clock, tmp_path):
    from storage.replay import read, replay

    path = tmp_path / "dead.jsonl"
    store = Store.open(db_url, StoreConfig(dead_letter=str(path), max_past_seconds=400 * 86400), clock=clock,
                       backfill=True)
    store.write_records([step(ts=T0), step("chat", ts=T0 + 20)])
    store.flush(T0 + 60)  # code's window holds 1 step in the database
    store.write_records([step(ts=T0 + 1), step("math", ts=T0 + 30, k=2, accepted=1)])
    real = away(store, db_url)
    assert store.spill("test") == 2  # code's window (2 steps in all) and math's
    back(store, real)
    with path.open("a") as out:  # a row the database refused, and a line that is no row
        out.write(json.dumps({"reason": "refused", "bucket_start": T0, "domain": "x"}) + "\n{not json\n")
    entries, left = read(path)
    assert len(entries) == 2 and left == {"refused": 1, "unreadable": 1}
    assert replay(store.db, entries, store.config.window_seconds) == (2, 0)
    assert totals(store) == {"code": 2, "chat": 1, "math": 1}
    row = {r["domain"]: r for r in store.stats(StatsQuery(by=("domain",), until=T0 + 86400)).rows}["math"]
    assert (row["drafted"], row["accepted"]) == (2, 1)
    assert replay(store.db, entries, store.config.window_seconds) == (0, 2)  # twice: nothing stored twice
    assert totals(store) == {"code": 2, "chat": 1, "math": 1}
    store.db.dispose()



def test_replay_into_a_packed_hour_keeps_the_blocks_fuller_total(db_url, clock, tmp_path):
    """A spilled total older than what the database holds, replayed once that hour is packed: the block's
    bucket holds more steps, so the row is skipped (it had replaced the bucket); a fuller one is written."""
    from storage.replay import read, replay

    path = tmp_path / "dead.jsonl"
    config = StoreConfig(dead_letter=str(path), max_past_seconds=400 * 86400)
    older = Store.open(db_url, config, clock=clock, backfill=True)  # its flush never came back: spilled
    older.write_records([step(ts=T0), step("chat", ts=T0 + 20)])
    assert older.spill("test") == 2  # code's window with 1 step, chat's with 1
    older.db.dispose()
    store = Store.open(db_url, config, clock=clock, backfill=True)
    store.write_records([step(ts=T0), step(ts=T0 + 1), step(ts=T0 + 2)])
    store.flush(T0 + 60)  # code's window: 3 steps in the database; chat's: none
    store.rollup(T0 + 2 * 3600)
    assert store.pack(T0 + 2 * 3600)["window"] == 1
    entries, _ = read(path)
    assert replay(store.db, entries, store.config.window_seconds) == (1, 1)  # chat's written, code's skipped
    assert totals(store) == {"code": 3, "chat": 1}
    store.rollup(T0 + 2 * 3600)
    store.pack(T0 + 2 * 3600)
    assert totals(store) == {"code": 3, "chat": 1}
    assert replay(store.db, entries, store.config.window_seconds) == (0, 2)  # in the block now: still skipped
    store.db.dispose()
