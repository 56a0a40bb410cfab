"""The stale-draft sequential test: decides drops fast, concludes "no drop" without one, keeps alpha."""

import random

import pytest

from alerts.detectors import BernoulliSPRT, ExpectedSPRT
from alerts.detectors.calibration import expected_theta
from alerts.detectors.sprt import DROP, NO_DROP
from drift_streams import expected, first_alarm, flags


def decide(test, stream):
    for x in stream:
        if test.update(x).decision is not None:
            break
    return test.decision, test.observations


def test_a_drop_is_confirmed_within_a_few_dozen_flags():
    test = BernoulliSPRT(0.9)
    assert first_alarm(test, flags(0.45, 500, random.Random(41))) == 29
    assert test.decision == DROP and test.change.before == 0.9 and test.change.after < 0.6
    assert not test.update(0).drift_detected  # decided: later updates are ignored


def test_no_drop_is_concluded_without_a_change():
    decision, n = decide(BernoulliSPRT(0.9), flags(0.9, 5000, random.Random(42)))
    assert decision == NO_DROP and n < 200


@pytest.mark.parametrize("alpha, most", [(1e-3, 2), (0.3, None)])
def test_false_drops_stay_within_alpha(alpha, most):
    false = sum(decide(BernoulliSPRT(0.8, alpha=alpha), flags(0.8, 5000, random.Random(s)))[0] == DROP
                for s in range(200))
    if most is not None:
        assert false <= most
    else:  # power: a lax alpha fails the same bound
        assert false > 2


def test_gives_up_after_max_observations():
    # one rejection in four: between 0.8 and the alternative 0.64, the ratio drifts too slowly to decide
    test = BernoulliSPRT(0.8, max_observations=300)
    assert decide(test, [1, 1, 0, 1] * 200) == (NO_DROP, 300)
    assert test.lower < test.statistic < test.upper


def test_expected_values_decide_sooner_than_flags():
    rng = random.Random(44)
    theta = expected_theta(expected(0.8, 5000, rng), 0.8, 0.8)
    on_values = decide(ExpectedSPRT(0.8, theta), expected(0.55, 2000, rng))
    on_flags = decide(BernoulliSPRT(0.8), flags(0.55, 2000, rng))
    assert on_values[0] == on_flags[0] == DROP and on_values[1] < on_flags[1]
    assert decide(ExpectedSPRT(0.8, theta), expected(0.8, 5000, rng))[0] == NO_DROP
