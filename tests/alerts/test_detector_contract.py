"""Contract of every detector: update returns self, no drift before enough data, reset, determinism."""

import math
import random

import pytest

from alerts.detectors import (ADWINDetector, BernoulliCUSUM, BernoulliSPRT, Detector, ExpectedCUSUM,
                              ExpectedSPRT)
from drift_streams import change, expected_change, first_alarm

# name -> (factory, stream with a drop at index 1500)
DETECTORS = {
    "cusum": (lambda: BernoulliCUSUM(warmup=1000), lambda seed: change(0.8, 0.3, 1500, 1500, seed)),
    "expected-cusum": (lambda: ExpectedCUSUM(warmup=1000),
                       lambda seed: expected_change(0.8, 0.4, 1500, 1500, seed)),
    "adwin": (lambda: ADWINDetector(warmup=1000), lambda seed: change(0.8, 0.3, 1500, 1500, seed)),
    "stale-draft": (lambda: BernoulliSPRT(0.8), lambda seed: change(0.3, 0.3, 1500, 1500, seed)),
    "stale-draft-expected": (lambda: ExpectedSPRT(0.8, 3.0),
                             lambda seed: expected_change(0.4, 0.4, 1500, 1500, seed)),
}


@pytest.fixture(params=sorted(DETECTORS))
def kind(request):
    return request.param


def test_is_a_detector_with_a_name(kind):
    detector = DETECTORS[kind][0]()
    assert isinstance(detector, Detector)
    assert detector.name and isinstance(detector.name, str)


def test_update_returns_self_and_a_finite_statistic(kind):
    detector = DETECTORS[kind][0]()
    for x in DETECTORS[kind][1](0)[:50]:
        assert detector.update(x) is detector
        assert math.isfinite(detector.statistic)


def test_no_drift_before_enough_data(kind):
    detector = DETECTORS[kind][0]()
    # all rejections: the worst data there is, but too little of it to decide on
    for _ in range(20):
        assert not detector.update(0).drift_detected


def test_detects_the_drop_and_reset_replays_identically(kind):
    factory, stream = DETECTORS[kind]
    detector = factory()
    data = stream(1)
    first = first_alarm(detector, data)
    assert first is not None, f"{kind} never fired"
    assert detector.change is not None and detector.change.after < detector.change.before
    assert detector.reset() is detector
    assert detector.statistic == 0.0 or kind == "adwin"
    assert first_alarm(detector, data) == first  # nothing learned survived the reset


def test_update_step_equals_flag_by_flag(kind):
    if kind.startswith("stale-draft-expected") or kind == "expected-cusum":
        pytest.skip("takes expected-acceptance values, not steps of flags")
    factory, _ = DETECTORS[kind]
    by_step, by_flag = factory(), factory()
    rng = random.Random(3)
    fired_step, fired_flag = [], []
    for step in range(4000):
        p = 0.85 if step < 2000 and kind != "stale-draft" else 0.4  # a version test starts at the change
        accepted = 0
        while accepted < 4 and rng.random() < p:
            accepted += 1
        rejected = accepted < 4
        if by_step.update_step(accepted, rejected).drift_detected:
            fired_step.append(step)
        if by_flag.update_many([1] * accepted + [0] * rejected).drift_detected:
            fired_flag.append(step)
        assert by_step.statistic == pytest.approx(by_flag.statistic, abs=1e-9)
    assert fired_step == fired_flag and fired_step


@pytest.mark.parametrize("factory, message", [
    (lambda: BernoulliCUSUM(arl0=1), "arl0"),
    (lambda: BernoulliCUSUM(ratio=1.0), "ratio"),
    (lambda: BernoulliCUSUM(warmup=100, block=16), "8 blocks"),
    (lambda: ExpectedCUSUM(block=-1), "block"),
    (lambda: ADWINDetector(delta=0), "delta"),
    (lambda: ADWINDetector(direction="up"), "direction"),
    (lambda: BernoulliSPRT(0.5, alpha=2), "alpha"),
    (lambda: BernoulliSPRT(0.5, min_observations=10, max_observations=5), "max_observations"),
    (lambda: BernoulliSPRT(1.0), "reference"),
])
def test_configs_are_validated_with_specific_messages(factory, message):
    with pytest.raises(ValueError, match=message):
        factory()


def test_config_or_keywords_not_both():
    from alerts.detectors import CUSUMConfig
    with pytest.raises(TypeError, match="not both"):
        BernoulliCUSUM(CUSUMConfig(), arl0=100)
    detector = BernoulliCUSUM(arl0=5000, ratio=0.6)
    assert (detector.arl0, detector.ratio, detector.warmup) == (5000, 0.6, 5000)  # under their own names
