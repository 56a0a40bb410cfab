"""Requests by the load they met (storage/loads.py): stored an hour and a band per row, summed exactly, on both
backends; records without a load stay out of it; a flush that fails keeps the sums for the next."""

from __future__ import annotations

import dataclasses

import pytest

from history import T0, aggregate
from storage import StatsQuery, StoreError
from storage.loads import MAX_KEYS, LoadTally


def loaded(domain: str, k: int, load: int | None, ts: float, steps: int = 10, accepted: int = 20,
           drafted: int = 30, seconds: float = 0.5, prompt: float | None = 0.1):
    r = aggregate(domain, k, steps, accepted if k else 0, ts, drafted=drafted if k else 0, seconds=seconds)
    return dataclasses.replace(r, load=load, prompt_seconds=prompt)


RECORDS = [
    loaded("chat", 8, 1, T0 + 5), loaded("chat", 8, 1, T0 + 50, accepted=10, drafted=40),
    loaded("chat", 0, 1, T0 + 60, steps=30, seconds=0.6), loaded("chat", 8, 7, T0 + 70, seconds=1.5),
    loaded("chat", 0, 8, T0 + 80, steps=30, seconds=1.2), loaded("copy", 8, 3, T0 + 3700),
    loaded("chat", 8, None, T0 + 90),  # says no load: counted in the windows, not by load
]


def by_load(store, *dims, **kw):
    return store.stats(StatsQuery(by=dims, until=T0 + 7200, **kw)).rows


def test_requests_are_summed_by_domain_pool_and_load_band(store):
    store.write_records(RECORDS)
    store.flush(T0 + 7200)
    rows = {(r["domain"], r["lookahead"], r["load"]): r for r in by_load(store, "domain", "lookahead", "load")}
    assert sorted(rows) == [("chat", 0, "1"), ("chat", 0, "5-8"), ("chat", 8, "1"), ("chat", 8, "5-8"),
                            ("copy", 8, "3-4")]
    alone = rows[("chat", 8, "1")]
    assert alone["requests"] == 2 and alone["tokens_per_request"] == (30 + 20) / 2
    assert alone["acceptance_rate"] == pytest.approx(30 / 70)
    assert alone["tokens_per_second"] == pytest.approx(50 / 1.0)
    assert alone["request_tokens_per_second"] == pytest.approx(50 / 1.2)
    assert alone["speedup"] == pytest.approx((50 / 1.0) / (30 / 0.6))
    busy = rows[("chat", 8, "5-8")]
    assert busy["speedup"] == pytest.approx((30 / 1.5) / (30 / 1.2))  # against K = 0 at the same load
    assert rows[("copy", 8, "3-4")]["speedup"] is None  # no K = 0 at that load
    windows = {r["domain"]: r for r in store.stats(StatsQuery(by=("domain",), until=T0 + 7200)).rows}
    assert windows["chat"]["steps"] == sum(r.steps for r in RECORDS if r.domain == "chat")


def test_flushes_of_the_same_hour_add_up(store):
    store.write_records(RECORDS[:2])
    store.flush(T0 + 60)
    store.write_records([loaded("chat", 8, 1, T0 + 100)])
    store.flush(T0 + 120)
    (row,) = by_load(store, "domain", "load", domain="chat")
    assert (row["requests"], row["load"], row["tokens_per_request"]) == (3, "1", 80 / 3)


def test_a_failed_write_keeps_the_sums_for_the_next_flush(store, monkeypatch):
    import storage.loads as loads

    store.write_records(RECORDS[:2])
    real = loads.write
    monkeypatch.setattr(loads, "write", lambda *a: (_ for _ in ()).throw(OSError("database away")))
    with pytest.raises(OSError):
        store.flush(T0 + 60)
    monkeypatch.setattr(loads, "write", real)
    store.flush(T0 + 120)
    (row,) = by_load(store, "load")
    assert row["requests"] == 2


def test_retention_drops_old_hours(store, clock):
    store.write_records(RECORDS)
    store.flush(T0 + 7200)
    clock.now = T0 + store.config.retain_hours + 3600 + 1  # the first hour is past retention, the second not
    assert store.prune()["load_hours"] == 4
    assert [r["domain"] for r in by_load(store, "domain", "load")] == ["copy"]


def test_by_load_takes_series_dimensions_only():
    with pytest.raises(StoreError, match="--by load combines with domain"):
        StatsQuery(by=("load", "hour"))
    with pytest.raises(StoreError, match="--by load"):
        StatsQuery(by=("load", "position"))


def test_the_tally_drops_the_oldest_hours_beyond_its_bound():
    tally = LoadTally("pod")
    taken = {(h * 3600, ("pod", "d", "t", "d1", 2), 0): [1, 1, 2, 1, 2, 0.1, 0.0] for h in range(MAX_KEYS + 5)}
    tally.put_back(taken)
    assert len(tally) == MAX_KEYS and tally.dropped == 5
    assert min(hour for hour, _, _ in tally.take()) == 5 * 3600
