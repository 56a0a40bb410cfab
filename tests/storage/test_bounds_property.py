"""Property: no record inside the documented bounds can make a flush, rollup, prune or query fail, and
every one of them is counted. Records anywhere in the ranges (K at the bound, timestamps at both skew
edges, seconds just under an hour, long unicode domain names at the length limit, many series) go through
write_records -> flush -> rollup -> prune -> stats on SQLite and PostgreSQL (a fresh database per example),
and the totals must equal the sums sent with nothing dead-lettered.

Power: ``test_the_old_bounds_fail_the_property`` runs the same property with the bounds of before (any
finite timestamp, seconds up to the largest float) and requires it to fail.
"""

from __future__ import annotations

import itertools
import math
import sys
import uuid
from collections import defaultdict

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import agent.records as records_module
from agent.records import StepRecord
from conftest import PG_SERVER
from history import T0
from storage import StatsQuery, Store, StoreConfig

NOW = T0 + 30 * 86400
CONFIG = dict(kmax=256, max_domain_length=64)
PRINTABLE = st.characters(categories=("L", "M", "N", "P", "S"), include_characters=" ")
_fresh = itertools.count()


def text(max_size: int) -> st.SearchStrategy[str]:
    """Printable unicode, often exactly at the length limit."""
    return st.text(PRINTABLE, min_size=1, max_size=max_size) | st.text(PRINTABLE, min_size=max_size,
                                                                       max_size=max_size)


@st.composite
def batches(draw, config: StoreConfig) -> list[StepRecord]:
    earliest = max(0.0, NOW - config.max_past_seconds)
    latest = float(min(NOW + config.max_future_seconds, records_module.MAX_TIMESTAMP))
    hour = records_module.MAX_STEP_SECONDS
    seconds = st.floats(0, hour, exclude_max=True) | st.just(math.nextafter(hour, 0))
    domains = draw(st.lists(text(config.max_domain_length), min_size=1, max_size=12))
    versions = draw(st.lists(text(128), min_size=1, max_size=3))
    out = []
    for _ in range(draw(st.integers(1, 60))):
        k = draw(st.sampled_from((0, 1, config.kmax)) | st.integers(0, config.kmax))
        a = draw(st.integers(0, k))
        expected = draw(st.none() | st.lists(st.floats(0, 1), min_size=k, max_size=k))
        out.append(StepRecord(
            domain=draw(st.sampled_from(domains)), lookahead=k, accepted=a,
            emitted=draw(st.integers(1, a + 1)), draft_seconds=draw(seconds), verify_seconds=draw(seconds),
            target_version=draw(st.sampled_from(versions)), draft_version=draw(st.sampled_from(versions)),
            accepted_mask=draw(st.none() | st.just([1] * a + [0] * (k - a))), expected_acceptance=expected,
            timestamp=draw(st.none() | st.sampled_from((earliest, latest)) | st.floats(earliest, latest)),
            pod=draw(st.none() | text(128))))
    return out


def fresh_url(db_url: str, tmp_path, pg_admin) -> tuple[str, callable]:
    """A new empty database for one example, and how to drop it."""
    if db_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path / f'p{next(_fresh)}.db'}", lambda: None
    schema = f"sw_prop_{uuid.uuid4().hex[:12]}"
    with pg_admin.connect() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))

    def drop():
        with pg_admin.connect() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))

    return f"{PG_SERVER}?options=-csearch_path%3D{schema}", drop


def expected_totals(records: list[StepRecord], pod: str) -> dict[tuple[str, str], list[float]]:
    out: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0, 0, 0, 0.0, 0.0])
    for r in records:
        t = out[(r.pod or pod, r.domain)]
        for i, v in enumerate((1, r.lookahead, r.accepted, r.emitted, r.draft_seconds, r.verify_seconds)):
            t[i] += v
    return out


def check_pipeline(url: str, records: list[StepRecord], config: StoreConfig) -> None:
    store = Store.open(url, config, clock=lambda: float(NOW), backfill=True)
    try:
        half = len(records) // 2
        store.write_records(records[:half])
        store.flush()  # open windows as partial rows
        store.write_records(records[half:])  # the older of these are counted late, at the floor
        store.flush()
        store.rollup(NOW + 7200)
        store.prune(NOW + 7200)
        store.flush(math.inf)
        rows = store.stats(StatsQuery(by=("pod", "domain"))).rows
        store.stats(StatsQuery(by=("lookahead", "position")))
        store.stats(StatsQuery(by=("target_version", "hour")))
        assert store.dead_lettered == 0 and store.unwritten == 0
    finally:
        store.close(flush=False)
    got = {(r["pod"], r["domain"]): [r["steps"], r["drafted"], r["accepted"], r["tokens_per_step"] * r["steps"],
                                     r["draft_seconds_per_step"] * r["steps"],
                                     r["verify_seconds_per_step"] * r["steps"]] for r in rows}
    want = expected_totals(records, config.pod)
    assert got.keys() == want.keys()
    for key, w in want.items():
        g = got[key]
        assert g[:3] == w[:3], key
        assert round(g[3]) == w[3], key
        assert math.isclose(g[4], w[4], rel_tol=1e-9, abs_tol=1e-6) and math.isclose(g[5], w[5], rel_tol=1e-9,
                                                                                      abs_tol=1e-6), key


def run_property(db_url, tmp_path, pg_admin, config: StoreConfig, examples: int, shrink: bool = True) -> None:
    phases = tuple(Phase) if shrink else (Phase.generate,)

    @settings(max_examples=examples, deadline=None, database=None, phases=phases, report_multiple_bugs=False,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                     HealthCheck.data_too_large])
    @given(batches(config))
    def prop(records):
        url, drop = fresh_url(db_url, tmp_path, pg_admin)
        try:
            check_pipeline(url, records, config)
        finally:
            drop()

    prop()


def test_nothing_inside_the_bounds_can_break_a_write_or_a_query(db_url, tmp_path, pg_admin):
    run_property(db_url, tmp_path, pg_admin, StoreConfig(**CONFIG), 40 if db_url.startswith("sqlite") else 20)


@pytest.mark.filterwarnings("ignore:Generating overly large repr")
def test_the_old_bounds_fail_the_property(tmp_path, pg_admin, monkeypatch):
    # Before: any finite timestamp and seconds up to the largest float passed validation.
    monkeypatch.setattr(records_module, "MAX_TIMESTAMP", sys.float_info.max)
    monkeypatch.setattr(records_module, "MAX_STEP_SECONDS", sys.float_info.max)
    old = StoreConfig(**CONFIG, max_past_seconds=10**308, max_future_seconds=10**308)
    with pytest.raises(AssertionError, match="dead_lettered"):  # a timestamp 1e300 cannot be stored
        run_property(f"sqlite:///{tmp_path / 'x.db'}", tmp_path, pg_admin, old, 100, shrink=False)
