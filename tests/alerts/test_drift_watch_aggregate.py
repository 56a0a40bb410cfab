"""DriftWatch on aggregate records (one per request of 20 steps): StaleDraft on a target change with a drop
and not without one, acceptance counted per drafted token, break-even and cost ratio from the record's time."""

import random

import pytest

from alerts.detectors.sprt import NO_DROP
from alerts.watch import DriftWatch
from history import fold
from test_drift_watch import REQUIRED, run, step

STEPS = 20  # steps per request


def requests(rng, p, n, k=4, split=False, **kwargs):
    return [fold([step(rng, p, k=k, values=[], **kwargs) for _ in range(STEPS)], split=split) for _ in range(n)]


def unconditional(p: float, k: int = 4) -> float:
    """Expected accepted / drafted for per-token acceptance p: sum of p^i, i = 1..k, over k."""
    return sum(p ** i for i in range(1, k + 1)) / k


@pytest.mark.parametrize("split", [False, True], ids=["seconds", "split-times"])
def test_stale_draft_fires_on_an_aggregate_stream_whose_acceptance_drops_after_a_target_change(split):
    rng = random.Random(1)
    records = requests(rng, 0.9, 100, split=split) + requests(rng, 0.4, 100, split=split, target="t2")
    found = run(DriftWatch(), records)
    assert [f.alertname for _, f in found] == ["StaleDraft"]
    i, finding = found[0]
    assert 100 <= i <= 102  # within the first requests of the new target (80 drafted tokens each)
    notes = finding.annotations
    assert all(notes.get(k) for k in REQUIRED), sorted(notes)
    assert (notes["old_target_version"], notes["new_target_version"]) == ("t1", "t2")
    # accepted / drafted, all K counted (0.77 at p = 0.9), not the flags up to the first rejection (0.9)
    assert float(notes["acceptance_before"]) == pytest.approx(unconditional(0.9), abs=0.02)
    assert float(notes["acceptance_after"]) < 0.35
    if split:  # draft time per drafted token over verify time per step: 0.001 / 0.01
        assert notes["cost_ratio"] == "0.100" and notes["lookahead"] == "4"


def test_no_stale_draft_on_an_aggregate_stream_without_a_drop():
    rng = random.Random(2)
    watch = DriftWatch()
    assert run(watch, requests(rng, 0.9, 100) + requests(rng, 0.9, 300, target="t2")) == []
    assert watch.version_test("logs").decision == NO_DROP


def test_a_small_drop_is_still_found_in_aggregates():
    # 0.9 -> 0.8 per token (0.77 -> 0.59 per drafted token): a drop a per-request count of one rejection
    # (accepted, rejected=1) would all but hide (accepted share 0.98 -> 0.96)
    rng = random.Random(3)
    found = run(DriftWatch(), requests(rng, 0.9, 100) + requests(rng, 0.8, 100, target="t2"))
    assert [f.alertname for _, f in found] == ["StaleDraft"] and found[0][0] <= 110


def test_below_break_even_from_aggregates_timed_by_seconds_alone():
    def stream(seed, spec_seconds):
        rng = random.Random(seed)
        return [fold([step(rng, 0.0, k=0, seconds=(0.0, 0.01)) for _ in range(STEPS)]) if i % 5 == 0
                else fold([step(rng, 0.5, values=[], seconds=spec_seconds) for _ in range(STEPS)])
                for i in range(600)]
    slower = run(DriftWatch(), stream(8, (0.02, 0.02)))  # ~1.9 tokens per 0.04 s < 1 per 0.01 s
    assert [f.alertname for _, f in slower] == ["BelowBreakEven"]
    notes = slower[0][1].annotations
    assert float(notes["speculative_goodput"]) == pytest.approx(1.94 / 0.04, rel=0.1)
    assert float(notes["plain_goodput"]) == pytest.approx(100, rel=0.01)
    assert run(DriftWatch(), stream(8, (0.002, 0.01))) == []  # faster than plain: nothing


@pytest.mark.parametrize("k, accepted, rejected", [(4, 62, 18), (4, 5, 1), (3, 0, 7), (4, 8, 0), (5, 3, 4)])
def test_an_aggregate_feeds_its_tokens_as_steps_of_k(k, accepted, rejected):
    from alerts.watch import _observe_tokens

    class Seen:
        def __init__(self):
            self.calls = []

        def observe(self, a, r, values):
            self.calls.append((a, r))
            return []

    seen = Seen()
    _observe_tokens(seen, k, accepted, rejected)
    assert sum(a for a, _ in seen.calls) == accepted and sum(r for _, r in seen.calls) == rejected
    assert all(r in (0, 1) and (a == 0 or r <= 1) and a <= k for a, r in seen.calls)
