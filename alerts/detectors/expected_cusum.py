"""One-sided CUSUM on expected acceptance: per drafted position, e = sum_x min(p(x), q(x)), the probability
that a token drafted there is accepted.

A flag is a coin flip with probability e, so the flag's log-likelihood ratio (Bernoulli, reference p0,
alternative p1 = ratio x p0) has expectation given e

    y(e) = e log(p1 / p0) + (1 - e) log((1 - p1) / (1 - p0))

This CUSUM adds y(e) instead of the flag's ratio (a Rao-Blackwellised Bernoulli CUSUM): the same drift
before and after a change as the flag CUSUM, without the coin's noise, and bounded like it (e is in
[0, 1]), so one odd position cannot raise an alarm. p0 is the warm-up's mean of e, less ``margin``
standard errors (CUSUMConfig).

Threshold: y is not a likelihood ratio, so it is scaled by theta, the root of mean(exp(theta y)) = 1 over
the warm-up's values (calibration.expected_theta), after which the relation of calibration.py applies to
theta y as to a likelihood ratio; theta is divided by the warm-up's dispersion for correlated values. Less
noise means a larger theta and a lower threshold in y: that is the gain over flags. In greedy decoding the
decoder still reports the overlap of the temperature-1 distributions: not the probability of a greedy
match, but a smooth proxy of it whose mean this detector watches all the same.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from alerts.detectors.base import make_config
from alerts.detectors.calibration import Warmup, expected_increments, expected_theta, threshold_for_arl
from alerts.detectors.checks import check_open_fraction, check_positive
from alerts.detectors.cusum import CUSUMConfig, OneSidedCUSUM


@dataclass(frozen=True)
class ExpectedCUSUMConfig(CUSUMConfig):
    """As CUSUMConfig, over expected-acceptance values. ``ratio`` defaults higher than the flag CUSUM's:
    with less noise a smaller drop is worth targeting."""

    ratio: float = 0.8


class ExpectedCUSUM(OneSidedCUSUM):
    """See the module docstring. ``update(e)`` takes one expected acceptance in [0, 1]."""

    name = "expected-cusum"

    def __init__(self, config: ExpectedCUSUMConfig | None = None, **hyper):
        self._theta = 1.0  # the last learned: a version test after a change uses it
        super().__init__(make_config(ExpectedCUSUMConfig, config, hyper))

    def _forget(self) -> None:
        super()._forget()
        self._up = self._slope = 0.0
        self._values: list[float] = []  # the warm-up's values, for theta

    # -- reference ------------------------------------------------------------------------------
    def _learn(self, warm: Warmup) -> None:
        values, self._values = self._values, []
        self._dispersion = dispersion = warm.dispersion(warm.variance, long=True)
        error = math.sqrt(dispersion * warm.variance / warm.n)
        p0 = _inside(max(warm.mean - self.margin * error, warm.mean / 2))
        # theta from the values shifted to the reference: the scale of the statistic's own increments
        shifted = [x - warm.mean + p0 for x in values]
        self._set(p0, expected_theta(shifted, p0, self.ratio, dispersion), warm.mean)

    def baseline(self, reference: float, theta: float, dispersion: float = 1.0) -> "ExpectedCUSUM":
        """Skip the warm-up: the reference mean of e and the scale theta (calibration.expected_theta, which
        divides by the dispersion given here)."""
        check_open_fraction("reference", reference)
        check_positive("theta", theta)
        self._forget()
        self._warm, self._dispersion = None, dispersion
        self._set(reference, theta, reference)
        return self

    def _set(self, p0: float, theta: float, level: float) -> None:
        self._up, self._slope, kl = expected_increments(p0, self.ratio, theta)
        self._reference, self._theta, self._level = p0, theta, level
        self._h = threshold_for_arl(self.arl0, kl)

    @property
    def theta(self) -> float:
        """The scale of the increments (already divided by ``dispersion``)."""
        return self._theta

    # -- updates --------------------------------------------------------------------------------
    def update(self, x: float) -> "ExpectedCUSUM":
        self._drift = False
        if self._warm is not None:
            self._values.append(x)
            self._learning(x)
            return self
        s = self._s + self._up + self._slope * x
        if s <= 0.0:
            self._clear()
            return self
        self._s, self._n, self._total = s, self._n + 1, self._total + x
        if s > self._h and self._n >= self.min_span:
            self._fire()
        return self

    def update_many(self, values) -> "ExpectedCUSUM":
        """As repeated ``update`` calls, in one loop (the hot path feeds a step's values at once)."""
        if self._warm is not None:
            return super().update_many(values)
        self._drift = False
        s, n, total, up, slope, h, span = self._s, self._n, self._total, self._up, self._slope, self._h, self.min_span
        for i, x in enumerate(values):
            s += up + slope * x
            if s <= 0.0:
                s, n, total = 0.0, 0, 0.0
            else:
                n += 1
                total += x
                if s > h and n >= span:
                    self._s, self._n, self._total = s, n, total
                    self._fire()
                    change = self._change
                    super().update_many(values[i + 1:])
                    self._drift, self._change = True, change
                    return self
        self._s, self._n, self._total = s, n, total
        return self

    def reset(self) -> "ExpectedCUSUM":
        self._theta = 1.0
        return super().reset()


def _inside(p: float) -> float:
    return min(max(p, 1e-3), 1 - 1e-3)
