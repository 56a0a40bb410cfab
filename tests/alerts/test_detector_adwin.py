"""ADWIN backstop: reports drops, not rises; the warm-up's dispersion tightens delta for correlated flags."""

import random

from alerts.detectors import ADWINDetector
from drift_streams import alarms, change, first_alarm, flags


def test_detection_index_on_a_seeded_stream():
    detector = ADWINDetector()
    assert first_alarm(detector, change(0.7, 0.35, 3000, 2000, 31)) == 3199
    assert detector.change.before > detector.change.after


def test_rises_are_not_reported_unless_asked():
    rising = change(0.35, 0.8, 3000, 3000, 32)
    assert alarms(ADWINDetector(), rising) == []
    assert alarms(ADWINDetector(direction="both"), rising) != []


def test_no_false_alarm_on_independent_flags():
    assert alarms(ADWINDetector(), flags(0.7, 200_000, random.Random(33))) == []


def test_correlated_flags_get_a_smaller_delta():
    rng = random.Random(34)
    stream = []
    while len(stream) < 300_000:
        stream += [0] * rng.randint(3, 7) if rng.random() < 0.05 else [1] * rng.randint(1, 12)
    detector = ADWINDetector().update_many(stream[:3000])
    assert detector.dispersion > 1 and detector.effective_delta < detector.delta ** 1.5
    assert len(alarms(ADWINDetector(), stream)) < len(alarms(ADWINDetector(block=0), stream))
