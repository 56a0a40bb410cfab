"""Writes: validation before anything is stored, idempotent flushes, late records, concurrency."""

import threading
from contextlib import contextmanager

import pytest

from specwatch_core.records import RecordError
from history import T0, step
from storage import StatsQuery


def totals(store, until=T0 + 3600):
    rows = store.stats(StatsQuery(by=("domain",), until=until)).rows
    return {r["domain"]: (r["steps"], r["drafted"], r["accepted"]) for r in rows}


@pytest.mark.parametrize("bad,field", [
    (dict(domain="x" * 65), "domain"), (dict(domain="a\tb"), "domain"), (dict(k=17, accepted=0), "lookahead"),
    (dict(accepted=5), "accepted"), (dict(emitted=0), "emitted"), (dict(emitted=9), "emitted"),
    (dict(draft_s=float("inf")), "draft_seconds"), (dict(verify_s=-0.1), "verify_seconds"),
    (dict(expected=1.5), "expected_acceptance"),
])
def test_a_bad_batch_is_rejected_whole_naming_index_and_field(store, bad, field):
    batch = [step(ts=T0), step(ts=T0 + 1), step(ts=T0 + 2, **bad)]
    with pytest.raises(RecordError) as info:
        store.write_records(batch)
    assert (info.value.index, info.value.field) == (2, field)
    assert str(info.value).startswith(f"record 2: {field}:")
    store.flush(T0 + 60)
    assert totals(store) == {}  # not even the two good records


def test_a_bad_mask_is_named(store):
    record = step(ts=T0)
    record.accepted_mask = [1, 0, 1, 0]
    with pytest.raises(RecordError, match="record 0: accepted_mask"):
        store.write_records([record])


def test_a_retried_flush_never_double_counts(store, monkeypatch):
    store.write_records([step(ts=T0), step(ts=T0 + 1)])
    real_write = store.db.write

    @contextmanager
    def commits_then_fails(*args, **kwargs):
        with real_write(*args, **kwargs) as conn:
            yield conn
        raise ConnectionError("connection lost after COMMIT")  # the client cannot tell it committed

    monkeypatch.setattr(store.db, "write", commits_then_fails)
    with pytest.raises(ConnectionError):
        store.flush(T0 + 60)
    monkeypatch.setattr(store.db, "write", real_write)
    assert store.flush(T0 + 60) == 1  # the same window again ...
    assert totals(store) == {"code": (2, 8, 4)}  # ... replaces, never adds


def test_a_failed_flush_keeps_its_windows_for_the_next(store, monkeypatch):
    store.write_records([step(ts=T0)])

    @contextmanager
    def fails(*args, **kwargs):
        raise ConnectionError("database unreachable")
        yield

    real_write = store.db.write
    monkeypatch.setattr(store.db, "write", fails)
    with pytest.raises(ConnectionError):
        store.flush(T0 + 60)
    monkeypatch.setattr(store.db, "write", real_write)
    store.flush(T0 + 3600)  # later than late_seconds: an unwritten window is still not dropped
    assert totals(store) == {"code": (1, 4, 2)}


def test_late_records_are_added_to_their_stored_window(store):
    store.write_records([step(ts=T0)])
    store.flush(T0 + 60)
    store.write_records([step(ts=T0 + 5, accepted=4)])  # late, but within late_seconds
    store.flush(T0 + 120)
    assert totals(store) == {"code": (2, 8, 6)}
    store.flush(T0 + 1000)
    store.write_records([step(ts=T0 + 1, accepted=1)])  # too late for its window: counted later
    store.flush(T0 + 2000)
    assert totals(store) == {"code": (3, 12, 7)} and store.late_records == 1


def test_close_flushes_open_windows(make_store):
    store = make_store()
    store.write_records([step(ts=T0)])
    store.close()
    assert totals(make_store()) == {"code": (1, 4, 2)}


def test_recording_and_flushing_on_two_threads(store):
    done = threading.Event()
    errors = []

    def flusher():
        try:
            while not done.is_set():
                store.flush(T0 + 100)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=flusher)
    thread.start()
    for i in range(40):
        store.write_records([step(ts=T0 + i * 2.5 + j / 100) for j in range(50)])
    done.set()
    thread.join()
    store.flush(T0 + 200)
    assert not errors and totals(store) == {"code": (2000, 8000, 4000)}


def test_a_restarted_pod_never_replaces_what_it_wrote_before(make_store, clock):
    clock.now = T0
    first = make_store(backfill=False)
    first.write_records([step(ts=T0 + 1)])
    clock.now = T0 + 5
    first.close()  # shutdown writes the open window [T0, T0 + 10)
    clock.now = T0 + 6
    second = make_store(backfill=False)  # the same pod, restarted within that window
    second.write_records([step(ts=T0 + 6, accepted=4)])
    second.flush(T0 + 60)
    assert totals(second) == {"code": (2, 8, 6)}  # counted in the next window, not over the first
    assert second.late_records == 1
