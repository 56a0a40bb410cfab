"""Aggregate records in storage: their sums stored exactly, unsplit time as verify time, no per-position rows;
mixed with per-step records in one window. On SQLite and PostgreSQL (the ``db_url`` fixture)."""

import pytest
import sqlalchemy as sa

from history import T0, aggregate, step
from storage import StatsQuery, schema


def window_rows(store) -> dict[int, dict]:
    """Stored window rows by lookahead (one series each here)."""
    w, s = schema.windows.c, schema.series.c
    with store.db.read() as conn:
        rows = conn.execute(sa.select(s.lookahead, w.steps, w.drafted, w.accepted, w.emitted, w.draft_seconds,
                                      w.verify_seconds).join_from(schema.windows, schema.series))
        return {r.lookahead: dict(r._mapping) for r in rows}


def position_rows(store) -> list[tuple[int, int, int]]:
    """(position, reached, accepted) from the stored windows."""
    rows = store.stats(StatsQuery(by=("position",), tier="window", until=T0 + 3600)).rows
    return [(r["position"], r["reached"], r["accepted"]) for r in rows]


def at_least(store, k: int) -> list[int | None]:
    """The K-``k`` window row's at_least_0..POSITIONS columns."""
    w, s = schema.windows.c, schema.series.c
    with store.db.read() as conn:
        return list(conn.execute(sa.select(*(w[c] for c in schema.AT_LEAST)).join_from(
            schema.windows, schema.series).where(s.lookahead == k)).one())


def test_an_aggregate_of_n_steps_stores_exactly_its_sums(store):
    store.write_records([aggregate("code", 4, steps=37, drafted=141, accepted=93, emitted=125, seconds=1.75,
                                   draft_s=0.25, verify_s=0.5, ts=T0 + 1)])
    store.flush(T0 + 60)
    row = window_rows(store)[4]
    assert (row["steps"], row["drafted"], row["accepted"], row["emitted"]) == (37, 141, 93, 125)
    assert row["draft_seconds"] == pytest.approx(0.25)
    assert row["verify_seconds"] == pytest.approx(1.5)  # the 1.0 s not split counts as verify time
    assert position_rows(store) == []  # an aggregate's positions are unknown
    assert at_least(store, 4) == [0] * 5 + [None] * (schema.POSITIONS - 4)


def test_per_step_and_aggregate_records_share_a_window(store):
    per_step = [step("code", 4, a, T0 + i) for i, a in enumerate((0, 2, 4))]  # 0.004 + 0.010 s each
    store.write_records([*per_step, aggregate("code", 4, steps=10, accepted=22, ts=T0 + 5, seconds=0.2),
                         aggregate("code", 0, steps=50, accepted=0, ts=T0 + 6, seconds=0.5)])
    store.flush(T0 + 60)
    rows = window_rows(store)
    r = rows[4]
    assert (r["steps"], r["drafted"], r["accepted"], r["emitted"]) == (13, 12 + 40, 6 + 22, 9 + 32)
    assert r["verify_seconds"] == pytest.approx(0.030 + 0.2) and r["draft_seconds"] == pytest.approx(0.012)
    assert (rows[0]["steps"], rows[0]["drafted"], rows[0]["emitted"]) == (50, 0, 50)
    # positions from the three per-step records only (accepted 0, 2 and 4 of 4); ...
    assert position_rows(store) == [(1, 3, 2), (2, 2, 2), (3, 2, 1), (4, 1, 1)]
    assert at_least(store, 4) == [3, 2, 2, 1, 1] + [None] * (schema.POSITIONS - 4)
    assert at_least(store, 0) == [None] * (schema.POSITIONS + 1)  # K = 0: no positions, nothing stored
    # ... and what the queries derive holds the sums (acceptance = accepted / drafted over all records).
    (row,) = [x for x in store.stats(StatsQuery(by=("lookahead",), until=T0 + 3600)).rows if x["lookahead"] == 4]
    assert row["acceptance_rate"] == pytest.approx(28 / 52)
    assert row["tokens_per_step"] == pytest.approx(41 / 13)


def test_aggregates_survive_the_rollup_to_minutes_and_hours(store):
    store.write_records([aggregate("code", 4, steps=10, accepted=22, ts=T0 + 5 + 30 * i) for i in range(4)])
    store.flush(T0 + 3600)
    store.rollup(T0 + 2 * 3600)
    [row] = store.stats(StatsQuery(by=("domain",), since=T0, until=T0 + 2 * 3600)).rows
    assert (row["steps"], row["drafted"], row["accepted"]) == (40, 160, 88)


def test_position_may_come_first_among_the_groups(store):
    store.write_records([step("code", 4, a, T0 + i) for i, a in enumerate((0, 2, 4))]
                        + [step("code", 2, a, T0 + 3 + i) for i, a in enumerate((1, 2))])
    store.flush(T0 + 60)

    def grouped(by):
        return {tuple(r[d] for d in ("lookahead", "position")): (r["reached"], r["accepted"])
                for r in store.stats(StatsQuery(by=by, tier="window", until=T0 + 3600)).rows}

    first, last = grouped(("position", "lookahead")), grouped(("lookahead", "position"))
    assert first == last == {(4, 1): (3, 2), (4, 2): (2, 2), (4, 3): (2, 1), (4, 4): (1, 1),
                             (2, 1): (2, 2), (2, 2): (2, 1)}


def test_k_up_to_64_stores_its_sums_and_counts_positions_up_to_32(make_store):
    store = make_store(kmax=64)
    # An n-gram pool capped at 64 (llama.cpp --spec-default): a request drafting the cap on every step, and
    # one drafting less; a per-step record of K = 40 that accepted 35 keeps its sums, positions 1..32 only.
    store.write_records([aggregate("code", 64, steps=12, drafted=64 * 12, accepted=700, seconds=0.5, ts=T0 + 1),
                         aggregate("code", 64, steps=30, drafted=95, accepted=80, seconds=0.4, ts=T0 + 2),
                         step("code", 40, 35, T0 + 3, expected=None)])
    store.flush(T0 + 60)
    rows = window_rows(store)
    assert (rows[64]["steps"], rows[64]["drafted"], rows[64]["accepted"]) == (42, 64 * 12 + 95, 780)
    assert (rows[40]["steps"], rows[40]["drafted"], rows[40]["accepted"], rows[40]["emitted"]) == (1, 40, 35, 36)
    assert at_least(store, 64) == [0] * (schema.POSITIONS + 1)  # aggregates: no positions
    assert at_least(store, 40) == [1] * (schema.POSITIONS + 1)  # accepted 35: at least 32 of the counted ones
    assert position_rows(store) == [(i, 1, 1) for i in range(1, schema.POSITIONS + 1)]
    store.rollup(T0 + 2 * 3600)
    (row,) = [r for r in store.stats(StatsQuery(by=("lookahead",), since=T0, until=T0 + 2 * 3600)).rows
              if r["lookahead"] == 64]
    assert row["acceptance_rate"] == pytest.approx(780 / (64 * 12 + 95))
