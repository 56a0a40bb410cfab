"""One lineage: a domain served by one (target version, draft version) pair, with its own drift detectors,
a running baseline of its acceptance, and, when it replaced another pair, the stale-draft test against it.

Keyed by versions rather than reset on a change so that records of both versions interleaving (a rolling
update, pods on different versions) feed each version's own state.
"""

from __future__ import annotations

import math
from operator import mul
from typing import Sequence

from alerts.detectors import (ADWINDetector, BernoulliCUSUM, BernoulliSPRT, Detector, ExpectedCUSUM,
                              ExpectedSPRT, SPRTConfig)
from alerts.detectors.sprt import SequentialTest
from alerts.watch_config import WatchConfig


class Baseline:
    """Count, sum and sum of squares of observations, faded with a half-life counted in observations, and
    the same for means of consecutive blocks of about ``block`` observations: the long-run dispersion at
    the scale of a request, which a version test deciding on a few hundred positions sees (flags of one
    request vary together)."""

    __slots__ = ("halflife", "block", "n", "total", "squares", "_fades", "_block_fade", "_count", "_sum",
                 "blocks", "block_total", "block_squares")

    def __init__(self, halflife: float, block: int):
        self.halflife, self.block = halflife, block
        self.n = self.total = self.squares = 0.0
        self._fades = [math.exp2(-c / halflife) for c in range(65)]  # a step counts at most 64 positions
        self._block_fade = math.exp2(-block / halflife)
        self._count, self._sum = 0, 0.0
        self.blocks = self.block_total = self.block_squares = 0.0

    def add(self, count: int, total: float, squares: float = 0.0) -> None:
        f = self._fades[count] if count < 65 else math.exp2(-count / self.halflife)
        self.n = self.n * f + count
        self.total = self.total * f + total
        self.squares = self.squares * f + squares
        self._count += count
        self._sum += total
        if self._count >= self.block:
            m, f = self._sum / self._count, self._block_fade
            self.blocks = self.blocks * f + 1
            self.block_total = self.block_total * f + m
            self.block_squares = self.block_squares * f + m * m
            self._count, self._sum = 0, 0.0

    @property
    def mean(self) -> float:
        return self.total / self.n if self.n else 0.0

    @property
    def variance(self) -> float:
        return _variance(self.n, self.total, self.squares)

    def dispersion(self, variance: float) -> float:
        """Block-mean variance x block / ``variance`` (per observation), at least 1; 1 with < 8 blocks."""
        if self.blocks < 8 or variance <= 0:
            return 1.0
        return max(1.0, _variance(self.blocks, self.block_total, self.block_squares) * self.block / variance)


def _variance(n: float, total: float, squares: float) -> float:
    if n <= 1:
        return 0.0
    m = total / n
    return max(squares / n - m * m, 0.0) * n / (n - 1)


class Lineage:
    __slots__ = ("versions", "cusum", "expected", "adwin", "detectors", "flags", "values", "test", "origin",
                 "before", "since")

    def __init__(self, versions: tuple[str, str], config: WatchConfig):
        self.versions = versions
        self.cusum = BernoulliCUSUM(config.cusum)
        self.expected = ExpectedCUSUM(config.expected) if config.expected is not None else None
        self.adwin = ADWINDetector(config.adwin) if config.adwin is not None else None
        self.detectors: tuple[Detector, ...] = tuple(d for d in (self.cusum, self.adwin, self.expected) if d)
        # what a version change is compared with: accept flags, and expected acceptance when records carry it
        self.flags = Baseline(config.baseline_halflife, config.test_block)
        self.values = Baseline(config.baseline_halflife, config.test_block)
        self.test: SequentialTest | None = None
        self.origin: tuple[str, str] | None = None  # the versions the test compares with
        self.before = 0.0  # the origin's acceptance when this lineage appeared
        self.since = 0.0  # when it appeared (unix seconds)

    def observe(self, accepted: int, rejected: int, values: Sequence[float] | None) -> list[Detector]:
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
            self.values.add(len(values), sum(values), sum(map(mul, values, values)))
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
            cusum, values = origin.expected, origin.values
            # theta of independent values, divided by the larger of the two dispersions
            phi = max(cusum.dispersion, values.dispersion(values.variance))
            self.test = ExpectedSPRT(_inside(values.mean), cusum.theta * cusum.dispersion / phi, config)
            return True
        if origin.flags.n >= min_baseline:
            p0 = _inside(origin.flags.mean)
            phi = max(origin.cusum.dispersion, origin.flags.dispersion(p0 * (1 - p0)))
            self.test = BernoulliSPRT(p0, phi, config)
            return True
        return False

    def statistics(self) -> dict[str, float]:
        out = {d.name: d.statistic for d in self.detectors}
        if self.test is not None:
            out[self.test.name] = self.test.statistic
        return out


def _inside(p: float) -> float:
    return min(max(p, 1e-3), 1 - 1e-3)
