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
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

import specwatch_core.records as records_module
from specwatch_core.records import StepRecord, drafted_of, verify_seconds_of
from conftest import PG_SERVER
from history import T0
from storage import StatsQuery, Store, StoreConfig, StoreError

NOW = T0 + 30 * 86400
CONFIG = dict(kmax=64, max_domain_length=64)  # 64: the largest K a store takes
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
    when = st.none() | st.sampled_from((earliest, latest)) | st.floats(earliest, latest)
    out = []
    for _ in range(draw(st.integers(1, 60))):
        k = draw(st.sampled_from((0, 1, config.kmax)) | st.integers(0, config.kmax))
        if draw(st.integers(0, 3)) == 0:
            out.append(draw(aggregates(k, domains, versions, seconds, when)))
            continue
        a = draw(st.integers(0, k))
        expected = draw(st.none() | st.lists(st.floats(0, 1), min_size=k, max_size=k))
        out.append(StepRecord(
            domain=draw(st.sampled_from(domains)), lookahead=k, accepted=a,
            emitted=draw(st.integers(1, a + 1)), draft_seconds=draw(seconds), verify_seconds=draw(seconds),
            target_version=draw(st.sampled_from(versions)), draft_version=draw(st.sampled_from(versions)),
            accepted_mask=draw(st.none() | st.just([1] * a + [0] * (k - a))), expected_acceptance=expected,
            timestamp=draw(when),
            pod=draw(st.none() | text(128))))
    return out


@st.composite
def aggregates(draw, k: int, domains: list[str], versions: list[str], seconds, when) -> StepRecord:
    """One request's aggregate record, often at the largest count the bounds allow (seven such records at
    K = 64 draft more than 2^31 tokens)."""
    most = records_module.MAX_STEPS
    steps = draw(st.sampled_from((1, 2, most)) | st.integers(1, most))
    drafted = draw(st.sampled_from((0, k * steps)) | st.integers(0, k * steps))
    accepted = draw(st.sampled_from((0, drafted)) | st.integers(0, drafted))
    draft, verify = draw(seconds), draw(seconds)
    hour = records_module.MAX_STEP_SECONDS
    wall = draw(st.none() | st.floats(draft + verify, hour, exclude_max=True)) if draft + verify < hour else None
    return StepRecord(domain=draw(st.sampled_from(domains)), lookahead=k, accepted=accepted,
                      emitted=draw(st.sampled_from((steps, accepted + steps)) | st.integers(steps, accepted + steps)),
                      draft_seconds=draft, verify_seconds=verify, target_version=draw(st.sampled_from(versions)),
                      draft_version=draw(st.sampled_from(versions)), steps=steps, drafted=drafted, seconds=wall,
                      pool=draw(st.none() | text(64)), timestamp=draw(when))


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
        for i, v in enumerate((r.steps, drafted_of(r), r.accepted, r.emitted, r.draft_seconds,
                               verify_seconds_of(r))):
            t[i] += v
    return out


def check_pipeline(url: str, records: list[StepRecord], config: StoreConfig, prepare=None) -> None:
    store = Store.open(url, config, clock=lambda: float(NOW), backfill=True)
    if prepare is not None:
        prepare(store)
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


def run_property(db_url, tmp_path, pg_admin, config: StoreConfig, examples: int, shrink: bool = True,
                 prepare=None, known: list[StepRecord] | None = None) -> None:
    """The property over ``examples`` drawn batches; ``known``: a batch tried first, every time (a broken
    variant's test must fail whatever the draws: random draws reach the extremes only most of the time)."""
    phases = tuple(Phase) if shrink else (Phase.explicit, Phase.generate)

    @settings(max_examples=examples, deadline=None, database=None, phases=phases, report_multiple_bugs=False,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                     HealthCheck.data_too_large])
    @given(batches(config))
    def prop(records):
        url, drop = fresh_url(db_url, tmp_path, pg_admin)
        try:
            check_pipeline(url, records, config, prepare)
        finally:
            drop()

    (example(records=known)(prop) if known is not None else prop)()


def at_the_bound(k: int = CONFIG["kmax"], steps: int | None = None, timestamp: float = NOW) -> StepRecord:
    """One request's aggregate with every count at its largest: K x MAX_STEPS drafted, all accepted."""
    steps = records_module.MAX_STEPS if steps is None else steps
    return StepRecord(domain="code", lookahead=k, accepted=k * steps, emitted=(k + 1) * steps,
                      draft_seconds=0.5, verify_seconds=0.5, target_version="t", draft_version="d", steps=steps,
                      drafted=k * steps, timestamp=timestamp)


def test_nothing_inside_the_bounds_can_break_a_write_or_a_query(db_url, tmp_path, pg_admin):
    # The batch the broken variants below fail on passes here, every time.
    run_property(db_url, tmp_path, pg_admin, StoreConfig(**CONFIG), 40 if db_url.startswith("sqlite") else 20,
                 known=[*[at_the_bound()] * 8, at_the_bound(k=1, steps=1)])


@pytest.mark.filterwarnings("ignore:Generating overly large repr")
def test_the_old_bounds_fail_the_property(tmp_path, pg_admin, monkeypatch):
    # Before: any finite timestamp and seconds up to the largest float passed validation.
    monkeypatch.setattr(records_module, "MAX_TIMESTAMP", sys.float_info.max)
    monkeypatch.setattr(records_module, "MAX_STEP_SECONDS", sys.float_info.max)
    old = StoreConfig(**CONFIG, max_past_seconds=10**308, max_future_seconds=10**308)
    with pytest.raises(AssertionError, match="dead_lettered"):  # a timestamp 1e300 cannot be stored
        run_property(f"sqlite:///{tmp_path / 'x.db'}", tmp_path, pg_admin, old, 100, shrink=False,
                     known=[at_the_bound(k=1, steps=1, timestamp=1e300)])


@pytest.mark.filterwarnings("ignore:Generating overly large repr")
def test_unbounded_steps_fail_the_property(tmp_path, pg_admin, monkeypatch):
    # Before: an aggregate record could fold any number of steps. Past 2^63 no database column holds it
    # (dead-lettered); past 2^53 the totals read back as floats are off by one (the two ways it fails).
    monkeypatch.setattr(records_module, "MAX_STEPS", 2**64)
    with pytest.raises(AssertionError, match=r"dead_lettered|assert \d+ == \d+"):
        run_property(f"sqlite:///{tmp_path / 'x.db'}", tmp_path, pg_admin, StoreConfig(**CONFIG), 100, shrink=False,
                     known=[at_the_bound(steps=2**62)])


@pytest.mark.filterwarnings("ignore:Generating overly large repr")
def test_four_byte_counts_fail_the_property(tmp_path, pg_admin):
    # Before migration 0002, PostgreSQL's counts were 4-byte: one aggregate at the bounds overflowed them.
    if pg_admin is None:
        pytest.skip(f"PostgreSQL is not reachable at {PG_SERVER}")

    def four_bytes(store: Store) -> None:
        with store.db.engine.begin() as conn:
            for table in ("windows", "minutes", "hours"):
                conn.execute(sa.text(f"ALTER TABLE {table} " + ", ".join(
                    f"ALTER COLUMN {c} TYPE integer" for c in ("steps", "drafted", "accepted", "emitted"))))

    # A window row past 2^31 is dead-lettered; rows that fit but sum past it make the hour rollup fail.
    with pytest.raises((AssertionError, StoreError), match="dead_lettered|out of range"):
        run_property(PG_SERVER, tmp_path, pg_admin, StoreConfig(**CONFIG), 100, shrink=False, prepare=four_bytes,
                     known=[at_the_bound()] * 8)
