"""FleetOutlier, the statistics alone, on synthetic fleet traces (tests/alerts/fleet_traces.py: 6 pods, 3
domains, one pair, 30 one-minute buckets; requests draw their own acceptance, so flags are overdispersed about
6-fold; healthy pods differ by Normal(0, 0.02)).

Budget: alpha = 1e-4 per evaluation for the whole fleet (all 18 pod x domain tests), so 0.04 false alarms are
expected in 400 evaluations; the tests allow 1. Broken variants fail the same test: without the tolerance and
minimum gap (pods' real small differences alarm: 38 of 400 busy evaluations), without the dispersion correction
or without any significance test (8 of 400 quiet ones; the default: 0 and 0). Power per evaluation (30 one-minute
buckets): a 0.15 drop on the busiest pod 98 of 100, a 0.2 drop on a quiet pod 97 of 100."""

from __future__ import annotations

import numpy as np
import pytest

import fleet_traces as ft
from alerts.detectors.fleet_outlier import FleetOutlier, FleetOutlierConfig, dispersion

QUIET = {p: 4.0 for p in ft.PODS}  # ~2,600 verified positions a pod in 30 minutes: just over the evidence needed


def outliers(config: FleetOutlierConfig, evaluation: dict) -> list[tuple[str, str, float]]:
    """(domain, pod, gap) of every outlier of one evaluation, Bonferroni over all its tests."""
    detector = FleetOutlier(config)
    tests = sum(len(detector.testable(b)) for b in evaluation.values())
    return [(d, r.pod, r.gap) for d, b in evaluation.items() for r in detector.update(b, tests).outliers]


def evaluations(n: int, seed: int, traffic: dict | None = None, planted=None) -> list[dict]:
    saved = ft.TRAFFIC
    ft.TRAFFIC = traffic or saved
    try:
        return [ft.evaluation(np.random.default_rng(seed + i), planted) for i in range(n)]
    finally:
        ft.TRAFFIC = saved


def false_alarms(config: FleetOutlierConfig, runs: list[dict]) -> int:
    return sum(bool(outliers(config, e)) for e in runs)


@pytest.fixture(scope="module")
def busy():
    return evaluations(400, 1000)


@pytest.fixture(scope="module")
def quiet():
    return evaluations(400, 5000, QUIET)


def test_a_planted_outlier_is_named_with_its_pair_gap():
    (found,) = outliers(FleetOutlierConfig(), ft.evaluation(np.random.default_rng(7), ("llm-3", "chat", 0.2)))
    domain, pod, gap = found
    assert (domain, pod) == ("chat", "llm-3") and 0.15 < gap < 0.25


def test_false_alarms_within_budget_on_busy_fleets(busy):
    assert false_alarms(FleetOutlierConfig(), busy) <= 1
    assert false_alarms(FleetOutlierConfig(min_gap=0, tolerance=0), busy) >= 15  # pods' real differences


def test_false_alarms_within_budget_on_quiet_fleets(quiet):
    assert false_alarms(FleetOutlierConfig(), quiet) <= 1
    assert false_alarms(FleetOutlierConfig(dispersion=False), quiet) >= 6  # binomial variance, ~6x too small
    assert false_alarms(FleetOutlierConfig(alpha=0.999), quiet) >= 6  # a gap over min_gap alone


@pytest.mark.parametrize("planted, power", [(("llm-0", "code", 0.15), 0.9), (("llm-4", "logs", 0.2), 0.8),
                                            (("llm-2", "chat", 0.2), 0.85)])
def test_power_on_a_planted_outlier(planted, power):
    runs = evaluations(100, 20_000, planted=planted)
    found = [outliers(FleetOutlierConfig(), e) for e in runs]
    hits = [gap for f in found for d, p, gap in f if (p, d) == planted[:2]]
    assert len(hits) >= power * len(runs)
    assert abs(np.median(hits) - planted[2]) < 0.03
    assert sum(any((p, d) != planted[:2] for d, p, _ in f) for f in found) <= 1  # no peer blamed


def test_pods_above_their_peers_and_pairs_of_two_are_not_outliers():
    rng = np.random.default_rng(3)
    high = ft.fleet(rng, {"a": 0.5, "b": 0.5, "c": 0.5, "d": 0.8}, spread=0)
    assert FleetOutlier().update(high).results and not FleetOutlier().update(high).drift_detected
    two = ft.fleet(rng, {"a": 0.7, "b": 0.3}, spread=0)
    assert FleetOutlier().testable(two) == [] and not FleetOutlier().update(two).results


def test_evidence_needed_and_dispersion():
    rng = np.random.default_rng(4)
    fleet = ft.fleet(rng, {"a": 0.6, "b": 0.6, "c": 0.6, "d": 0.2}, spread=0, traffic={"d": 0.3})
    assert "d" not in FleetOutlier().testable(fleet)  # too few positions to say anything
    independent = {p: [(100, int(k)) for k in rng.binomial(100, 0.6, 30)] for p in "abc"}
    assert dispersion(independent) < 1.5 < dispersion(ft.fleet(rng, {"a": 0.6, "b": 0.6}, spread=0))


@pytest.mark.parametrize("bad", [dict(alpha=0), dict(min_gap=1.5), dict(tolerance=0.2), dict(min_buckets=1),
                                 dict(min_peers=0)])
def test_config_is_validated(bad):
    with pytest.raises(ValueError):
        FleetOutlierConfig(**bad)
