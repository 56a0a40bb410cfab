"""Expected-acceptance CUSUM: faster than flags, sees smaller drops, exact batch form, re-baselines."""

import random
import statistics

import pytest

from alerts.detectors import BernoulliCUSUM, ExpectedCUSUM
from drift_streams import alarms, change, expected, expected_change, first_alarm


class WrongSign(ExpectedCUSUM):
    """Broken on purpose: high expected acceptance pushes the statistic up."""

    def _set(self, *args):
        super()._set(*args)
        self._up, self._slope = self._up + self._slope, -self._slope


def delay(detector, stream, at: int) -> int | None:
    found = first_alarm(detector, stream)
    return found - at if found is not None and found >= at else None


CHANGE = 6000  # the default warm-up (5000 values) and 1000 more


def test_detection_index_on_a_seeded_stream():
    assert first_alarm(ExpectedCUSUM(), expected_change(0.7, 0.35, CHANGE, 2000, 21)) == CHANGE + 32


def test_sees_a_small_drop_the_flag_cusum_misses_and_the_broken_variant_does_not():
    exp = [delay(ExpectedCUSUM(), expected_change(0.7, 0.55, CHANGE, 3000, s), CHANGE) for s in range(20)]
    flag = [delay(BernoulliCUSUM(), change(0.7, 0.55, CHANGE, 3000, s), CHANGE) for s in range(20)]
    assert None not in exp and statistics.median(exp) <= 250
    # the flag CUSUM aims at halved acceptance: slower on a small drop by far
    assert statistics.median([d if d is not None else 10**9 for d in flag]) > 3 * statistics.median(exp)
    broken = [delay(WrongSign(), expected_change(0.7, 0.55, CHANGE, 3000, s), CHANGE) for s in range(20)]
    assert sum(d is not None and d <= 250 for d in broken) <= 1


def test_no_false_alarm_on_a_long_stationary_stream():
    stream = expected(0.7, 200_000, random.Random(22))
    assert alarms(ExpectedCUSUM(), stream) == []
    assert len(alarms(ExpectedCUSUM(arl0=10_000), stream)) <= 20  # 200k values / arl0


def test_batch_form_is_exact_and_rebaselines_after_firing():
    stream = expected_change(0.8, 0.3, CHANGE, 6000, 23)
    one, batch = ExpectedCUSUM(), ExpectedCUSUM()
    singles = alarms(one, stream)
    batched = []
    for i in range(0, len(stream), 5):
        if batch.update_many(stream[i:i + 5]).drift_detected:
            batched.append(i // 5)
    assert len(singles) == 1 and [s // 5 for s in singles] == batched
    assert one.statistic == pytest.approx(batch.statistic, abs=1e-9)
    assert one.warming_up is False and abs(one.reference - 0.3) < 0.05  # the new level, learned
    assert one.change.before > 0.75 and one.change.after < 0.45
