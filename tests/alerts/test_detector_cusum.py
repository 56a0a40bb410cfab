"""Bernoulli CUSUM: detection delay, false alarms at the documented rate, re-baselining; broken variants
(wrong sign, no warm-up, no dispersion) fail the same checks."""

import random
import statistics

from alerts.detectors import BernoulliCUSUM
from drift_streams import alarms, change, first_alarm, flags


class WrongSign(BernoulliCUSUM):
    """Broken on purpose: watches for acceptance rising."""

    def _set(self, *args):
        super()._set(*args)
        self._up, self._down = self._down, self._up  # accepted flags push the statistic up


class NoWarmup(BernoulliCUSUM):
    """Broken on purpose: a fixed reference instead of one learned from a warm-up."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.baseline(0.9)

    def rebaseline(self):
        super().rebaseline()
        return self.baseline(0.9)


CHANGE = 6000  # the default warm-up (5000 flags) and 1000 more


def delay(detector, seed: int) -> int | None:
    """Flags from the change (0.7 -> 0.35 at CHANGE) to the alarm; None if it came before or never."""
    at = first_alarm(detector, change(0.7, 0.35, CHANGE, 2000, seed))
    return at - CHANGE if at is not None and at >= CHANGE else None


def test_detection_index_on_a_seeded_stream():
    assert first_alarm(BernoulliCUSUM(), change(0.7, 0.35, CHANGE, 2000, 11)) == CHANGE + 91


def test_median_delay_of_a_halved_acceptance_is_at_most_60_flags():
    delays = [delay(BernoulliCUSUM(), seed) for seed in range(40)]
    assert None not in delays
    assert statistics.median(delays) <= 60
    broken = [delay(WrongSign(), seed) for seed in range(40)]
    assert sum(d is not None and d <= 60 for d in broken) <= 2  # it does not see drops


def test_false_alarms_at_most_the_documented_rate():
    stream = flags(0.7, 200_000, random.Random(12))
    # arl0 = 1e4 flags: at most 20 alarms expected in 200k flags (the relation is a floor)
    assert len(alarms(BernoulliCUSUM(arl0=10_000), stream)) <= 20
    assert len(alarms(NoWarmup(arl0=10_000), stream)) > 20  # the reference must be learned
    assert alarms(BernoulliCUSUM(), stream) == []  # the default, 1e6 flags


def test_rebaselines_after_firing():
    rng = random.Random(13)
    stream = flags(0.8, CHANGE, rng) + flags(0.35, 8000, rng) + flags(0.12, 2000, rng)
    fired = alarms(BernoulliCUSUM(), stream)
    assert len(fired) == 2 and CHANGE <= fired[0] <= CHANGE + 60 and CHANGE + 8000 <= fired[1] <= CHANGE + 8150
    first = BernoulliCUSUM()
    first_alarm(first, stream[: fired[0] + 1])
    assert first.warming_up and first.reference is None
    assert first.change.before > 0.75 and 0.1 < first.change.after < 0.5
    for x in stream[fired[0] + 1: fired[0] + 5001]:
        first.update(x)
    assert not first.warming_up and abs(first.reference - 0.35) < 0.03  # learned the new level


def test_dispersion_keeps_correlated_flags_from_alarming():
    rng = random.Random(14)
    stream = []
    while len(stream) < 300_000:  # hard passages: runs of rejections, as inside real requests
        stream += [0] * rng.randint(3, 7) if rng.random() < 0.05 else [1] * rng.randint(1, 12)
    assert BernoulliCUSUM().update_many(stream[:6000]).dispersion > 1
    assert len(alarms(BernoulliCUSUM(), stream)) <= 1
    assert len(alarms(BernoulliCUSUM(block=0), stream)) > 5  # taking flags as independent does not


def test_warmup_waits_for_enough_rejections():
    rng = random.Random(15)
    detector = BernoulliCUSUM(warmup=1000)
    stream = flags(0.995, 20_000, rng)
    detector.update_many(stream[:1000])
    assert detector.warming_up  # about 5 rejections: 0.995 cannot be told from 0.999 yet
    n = next(i for i in range(1000, 20_000) if not detector.update(stream[i]).warming_up)
    assert stream[: n + 1].count(0) == 30 and 0.985 < detector.reference < 0.997
