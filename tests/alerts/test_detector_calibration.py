"""The threshold / false-alarm-interval relation, checked by simulation and by the exact Markov chain (on the
plain CUSUM, min_span=1: a longer span only delays alarms, so it only lengthens the interval)."""

import math
import random
import statistics

import pytest

from alerts.detectors import BernoulliCUSUM, ExpectedCUSUM
from alerts.detectors.calibration import (Warmup, arl_approx, bernoulli_cusum_arl, bernoulli_kl,
                                          expected_theta, flag_increments, threshold_for_arl)


def mean_run_length(make, draw, runs: int, seed: int, cap: int) -> float:
    """Mean number of observations to the first alarm of fresh detectors on a stationary stream."""
    rng = random.Random(seed)
    lengths = []
    for _ in range(runs):
        detector, n = make(), 0
        while n < cap:
            n += 1
            if detector.update(draw(rng)).drift_detected:
                break
        lengths.append(n)
    return statistics.fmean(lengths)


@pytest.mark.parametrize("arl0, kl, overshoot", [(1e6, 0.25, 0.0), (500, 0.05, 0.0), (1e4, 0.5, 1.166)])
def test_threshold_inverts_the_approximation(arl0, kl, overshoot):
    h = threshold_for_arl(arl0, kl, overshoot)
    assert arl_approx(h, kl, overshoot) == pytest.approx(arl0, rel=1e-9)
    assert threshold_for_arl(arl0 * 10, kl, overshoot) > h  # a longer interval needs a higher threshold


@pytest.mark.parametrize("p0", [0.5, 0.9])
def test_flag_cusum_meets_its_false_alarm_interval(p0):
    arl0 = 500
    draw = lambda rng: 1 if rng.random() < p0 else 0  # noqa: E731
    good = mean_run_length(lambda: BernoulliCUSUM(arl0=arl0, min_span=1).baseline(p0), draw, 300, 1, 50 * arl0)
    assert arl0 <= good <= 5 * arl0  # a floor, not far from it
    # power: a threshold set for a 20x shorter interval fails the same check
    h_low = threshold_for_arl(arl0 / 20, bernoulli_kl(p0, p0 / 2))

    def broken():
        detector = BernoulliCUSUM(arl0=arl0, min_span=1).baseline(p0)
        detector._h = h_low
        return detector
    assert mean_run_length(broken, draw, 300, 1, 50 * arl0) < arl0


def test_markov_chain_matches_simulation_and_the_goals():
    p0 = 0.7
    detector = BernoulliCUSUM(arl0=300, min_span=1).baseline(p0)
    up, down, _ = flag_increments(p0, 0.5)
    exact = bernoulli_cusum_arl(detector.threshold, p0, up, down)
    simulated = mean_run_length(lambda: BernoulliCUSUM(arl0=300, min_span=1).baseline(p0),
                                lambda rng: 1 if rng.random() < p0 else 0, 600, 2, 100_000)
    assert exact == pytest.approx(simulated, rel=0.1)
    # the default design: ARL0 >= 1e6 flags for every reference, and 0.7 -> 0.35 in <= 60 flags on average
    for p in (0.5, 0.7, 0.9, 0.98):
        h = BernoulliCUSUM().baseline(p).threshold
        up, down, _ = flag_increments(p, 0.5)
        assert bernoulli_cusum_arl(h, p, up, down) >= 1e6
    h = BernoulliCUSUM().baseline(0.7).threshold
    up, down, _ = flag_increments(0.7, 0.5)
    assert bernoulli_cusum_arl(h, 0.35, up, down) <= 60


@pytest.mark.parametrize("mean, concentration", [(0.9, 2.0), (0.6, 6.0)])
def test_expected_cusum_meets_its_false_alarm_interval_on_skewed_values(mean, concentration):
    arl0 = 400
    a, b = mean * concentration, (1 - mean) * concentration
    draw = lambda rng: rng.betavariate(a, b)  # noqa: E731
    rng = random.Random(9)
    sample = [draw(rng) for _ in range(20000)]
    theta = expected_theta(sample, mean, 0.8)
    good = mean_run_length(lambda: ExpectedCUSUM(arl0=arl0, min_span=1).baseline(mean, theta), draw, 300, 3, 50 * arl0)
    assert arl0 <= good <= 6 * arl0
    if mean == 0.9:
        # power: the Brownian scale 2 KL / Var ignores the long tail of e towards 0 and alarms too often
        _, _, kl = flag_increments(mean, 0.8)
        up, down, _ = flag_increments(mean, 0.8)
        brownian = 2 * kl / ((up - down) ** 2 * statistics.pvariance(sample))
        assert mean_run_length(lambda: ExpectedCUSUM(arl0=arl0, min_span=1).baseline(mean, brownian), draw, 300, 3,
                               50 * arl0) < arl0


def test_dispersion_is_one_for_independent_flags_and_large_for_runs():
    rng = random.Random(4)
    iid = Warmup(16)
    runs = Warmup(16)
    for _ in range(125):  # 1000 flags each
        for _ in range(8):
            iid.add(1 if rng.random() < 0.7 else 0)
        x = 1 if rng.random() < 0.7 else 0
        for _ in range(8):  # runs of 8 equal flags: strongly correlated
            runs.add(x)
    assert iid.dispersion(iid.mean * (1 - iid.mean)) == 1.0
    assert runs.dispersion(runs.mean * (1 - runs.mean)) > 4
    assert Warmup(0).dispersion(0.21) == 1.0  # blocks off


def test_theta_is_larger_when_values_are_less_noisy():
    rng = random.Random(5)
    noisy = [rng.betavariate(1.4, 0.6) for _ in range(5000)]  # mean 0.7, concentration 2
    calm = [rng.betavariate(14, 6) for _ in range(5000)]  # mean 0.7, concentration 20
    assert expected_theta(calm, 0.7, 0.8) > 3 * expected_theta(noisy, 0.7, 0.8)
    flags = [1.0 if rng.random() < 0.7 else 0.0 for _ in range(20000)]
    assert expected_theta(flags, statistics.fmean(flags), 0.8) == pytest.approx(1.0, abs=0.02)  # a true LLR
    assert math.isfinite(expected_theta([0.9] * 50, 0.7, 0.8))
