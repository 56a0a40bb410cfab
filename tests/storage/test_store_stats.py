"""Records in -> stats out, exactly, on both backends."""

import pytest

from history import T0, step
from storage import StatsQuery, StoreError

RECORDS = [
    step("code", 4, 2, T0 + 1, expected=0.5),
    step("code", 4, 4, T0 + 2, expected=0.9),
    step("code", 0, 0, T0 + 3, draft_s=0.0, verify_s=0.008, expected=None),
    step("chat", 2, 0, T0 + 4, pod="pod-b", target="t2"),
]


@pytest.fixture
def filled(store):
    store.write_records(RECORDS)
    store.flush(T0 + 60)
    return store


def by(store, *dims, **kw):
    return store.stats(StatsQuery(by=dims, until=T0 + 60, **kw)).rows


def test_sums_and_ratios_by_domain(filled):
    chat, code = by(filled, "domain")
    assert (code["domain"], code["steps"], code["drafted"], code["accepted"]) == ("code", 3, 8, 6)
    assert code["acceptance_rate"] == 0.75
    assert code["mean_accepted"] == 3.0  # over the two speculative steps
    assert code["tokens_per_step"] == 3.0  # (3 + 5 + 1) / 3
    assert code["draft_seconds_per_step"] == pytest.approx(0.008 / 3)
    assert code["verify_seconds_per_step"] == pytest.approx(0.028 / 3)
    assert code["expected_acceptance"] == pytest.approx((4 * 0.5 + 4 * 0.9) / 8)
    assert code["speedup"] == pytest.approx((8 / 0.028) / (1 / 0.008))
    assert (chat["steps"], chat["drafted"], chat["accepted"], chat["acceptance_rate"]) == (1, 2, 0, 0.0)
    assert chat["speedup"] is None  # no K = 0 steps for chat


def test_by_position_is_conditional_and_stops_at_the_first_rejection(filled):
    rows = by(filled, "position")
    assert [(r["position"], r["reached"], r["accepted"]) for r in rows] == [
        (1, 3, 2), (2, 2, 2), (3, 2, 1), (4, 1, 1)]
    assert rows[2]["conditional_acceptance"] == 0.5


def test_by_lookahead_compares_every_k_with_k0(filled):
    rows = {r["lookahead"]: r for r in by(filled, "lookahead", domain="code")}
    assert rows[0]["speedup"] is None and rows[0]["tokens_per_step"] == 1.0
    assert rows[4]["speedup"] == pytest.approx((8 / 0.028) / (1 / 0.008))


def test_by_pod_version_and_time(filled):
    assert [(r["pod"], r["steps"]) for r in by(filled, "pod")] == [("local", 3), ("pod-b", 1)]
    assert [(r["target_version"], r["steps"]) for r in by(filled, "target_version")] == [("t1", 3), ("t2", 1)]
    assert [(r["minute"], r["domain"], r["steps"]) for r in by(filled, "minute", "domain")] == [
        (T0, "chat", 1), (T0, "code", 3)]
    assert [(r["day"], r["steps"]) for r in by(filled, "day")] == [(T0, 4)]


def test_range_and_domain_filters(filled):
    assert by(filled, "domain", domain="nope") == []
    assert filled.stats(StatsQuery(since=T0 + 10, until=T0 + 60)).rows == []  # the window starts at T0


def test_bad_queries_are_refused():
    with pytest.raises(StoreError, match="cannot group by 'colour'"):
        StatsQuery(by=("colour",))
    with pytest.raises(StoreError, match="at most one of minute, hour, day"):
        StatsQuery(by=("hour", "day"))
    with pytest.raises(StoreError, match="since must be before until"):
        StatsQuery(since=10, until=5)
