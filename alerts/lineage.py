"""One lineage: a domain served by one (target version, draft version) pair, with its own drift detectors,
a running baseline of its acceptance, and, when it replaced another pair, the stale-draft test against it.

Keyed by versions rather than reset on a change so that records of both versions interleaving (a rolling
update, pods on different versions) feed each version's own state.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Sequence

from alerts.detectors import (ADWINDetector, BernoulliCUSUM, BernoulliSPRT, Detector, ExpectedCUSUM,
                              ExpectedSPRT, SPRTConfig)
from alerts.detectors.sprt import SequentialTest

if TYPE_CHECKING:
    from alerts.watch import WatchConfig


class Recent:
    """Count, sum and sum of squares of observations, faded with a half-life counted in observations."""

    __slots__ = ("halflife", "n", "total", "squares")

    def __init__(self, halflife: float):
        self.halflife = halflife
        self.n = self.total = self.squares = 0.0

    def add(self, count: int, total: float, squares: float = 0.0) -> None:
        f = math.exp2(-count / self.halflife)
        self.n = self.n * f + count
        self.total = self.total * f + total
        self.squares = self.squares * f + squares

    @property
    def mean(self) -> float:
        return self.total / self.n if self.n else 0.0

    @property
    def sd(self) -> float:
        if self.n <= 1:
            return 0.0
        m = self.total / self.n
        return math.sqrt(max(self.squares / self.n - m * m, 0.0) * self.n / (self.n - 1))


class Lineage:
    __slots__ = ("versions", "cusum", "expected", "adwin", "detectors", "flags", "values", "test", "origin",
                 "before", "since")

    def __init__(self, versions: tuple[str, str], config: "WatchConfig"):
        self.versions = versions
        self.cusum = BernoulliCUSUM(config.cusum)
        self.expected = ExpectedCUSUM(config.expected) if config.expected is not None else None
        self.adwin = ADWINDetector(config.adwin) if config.adwin is not None else None
        self.detectors: tuple[Detector, ...] = tuple(d for d in (self.cusum, self.expected, self.adwin) if d)
        self.flags = Recent(config.baseline_halflife)  # accept flags: the acceptance a change is compared with
        self.values = Recent(config.baseline_halflife)  # expected acceptance, when records carry it
        self.test: SequentialTest | None = None
        self.origin: tuple[str, str] | None = None  # the versions the test compares with
        self.before = 0.0  # the origin's acceptance when this lineage appeared
        self.since = 0.0  # when it appeared (unix seconds)

    def observe(self, accepted: int, rejected: bool, values: Sequence[float] | None) -> list[Detector]:
        """One step's flags (and expected-acceptance values of the same positions); the drift detectors
        that confirmed a drop, and the version test if it confirmed one with this step. A confirmed drift
        re-baselines the lineage's other drift detectors too."""
        self.flags.add(accepted + rejected, accepted)
        fired = []
        if self.cusum.update_step(accepted, rejected).drift_detected:
            fired.append(self.cusum)
        if self.adwin is not None and self.adwin.update_step(accepted, rejected).drift_detected:
            fired.append(self.adwin)
        if values:
            self.values.add(len(values), sum(values), sum(v * v for v in values))
            if self.expected is not None and self.expected.update_many(values).drift_detected:
                fired.append(self.expected)
        if fired:
            for detector in self.detectors:
                if detector not in fired:
                    detector.rebaseline()
        test = self.test
        if test is not None and test.decision is None:
            if isinstance(test, ExpectedSPRT):
                if values:
                    test.update_many(values)
            else:
                test.update_step(accepted, rejected)
            if test.drift_detected:
                fired.append(test)
        return fired

    def start_test(self, origin: "Lineage", config: SPRTConfig, min_baseline: int, expected: bool) -> bool:
        """Test this lineage against ``origin``'s baseline; False when the origin has too little of one.
        On expected acceptance when ``expected`` (the records carry it) and the origin has that baseline,
        else on accept flags. Records without expected acceptance do not feed an expected-acceptance test."""
        self.origin, self.before = origin.versions, origin.flags.mean
        if expected and origin.expected is not None and origin.values.n >= min_baseline:
            self.test = ExpectedSPRT(_inside(origin.values.mean), origin.expected.theta, config)
            return True
        if origin.flags.n >= min_baseline:
            self.test = BernoulliSPRT(_inside(origin.flags.mean), origin.cusum.dispersion, config)
            return True
        return False

    def statistics(self) -> dict[str, float]:
        out = {d.name: d.statistic for d in self.detectors}
        if self.test is not None:
            out[self.test.name] = self.test.statistic
        return out


def _inside(p: float) -> float:
    return min(max(p, 1e-3), 1 - 1e-3)
