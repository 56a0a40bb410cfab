"""One-sided Bernoulli CUSUM on accept flags (Page 1954; Reynolds and Stoumbos 1999).

The reference acceptance p0 is learned from a warm-up (set ``margin`` standard errors below its mean); the
alternative is p1 = ratio x p0. Each flag adds its log-likelihood ratio log(p1 / p0) for an accepted token
(negative) or log((1 - p1) / (1 - p0)) for a rejected one, divided by the warm-up's dispersion,
S = max(0, S + that), and S > h confirms the drop. h comes from the target false-alarm interval ``arl0``
(in flags) by ``threshold_for_arl`` (calibration.py: ARL0 ~= (e^h - h - 1) / KL(p0 || p1), a floor for
these increments). After a change the detector learns a new reference.

The per-step form is exact: accepted flags only pull S down, so a step's ``accepted`` flags act at once and
an alarm can only come with the rejected one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from alerts.detectors.base import Baselined, Change, make_config
from alerts.detectors.calibration import Warmup, flag_increments, threshold_for_arl
from alerts.detectors.checks import check_at_least, check_count, check_open_fraction


@dataclass(frozen=True)
class CUSUMConfig:
    """``arl0``: target mean number of flags between false alarms on a stationary stream. ``ratio``: the
    alternative acceptance as a fraction of the reference. ``warmup``: flags that learn the reference, at
    least; ``min_events``: acceptances and rejections the warm-up must have seen (see base.Baselined).
    ``block``: block length of the dispersion estimate (0: take flags as independent). ``margin``: standard
    errors of the warm-up's mean by which the reference is set below it. An over-estimated reference makes
    ordinary acceptance look like a drop and shortens the false-alarm interval exponentially in the error
    (Jones, Champ and Rigdon 2004, "The run length distribution of the CUSUM with estimated parameters");
    one standard error costs ~10% of delay. ``min_span``: observations since the estimated change point an
    alarm needs (a burst of rejections inside one request is not a drift). ``warmup`` is long because real
    acceptance has rare episodes (a sampled passage the draft cannot follow: acceptance halved for a few
    dozen tokens) that a short warm-up misses; its reference and dispersion then make the first episode an
    alarm (measured on sampled model-kit traces: about 0.4 false alarms in the 5000 tokens after a 1000-token
    warm-up, 0.05 after a 5000-token one)."""

    arl0: float = 1_000_000.0
    ratio: float = 0.5
    warmup: int = 5000
    block: int = 16
    min_events: int = 30
    margin: float = 1.0
    min_span: int = 32

    def __post_init__(self) -> None:
        check_at_least("arl0", self.arl0, 10)
        check_open_fraction("ratio", self.ratio)
        check_count("warmup", self.warmup, 10)
        check_count("block", self.block, 0)
        check_count("min_events", self.min_events, 0)
        check_at_least("margin", self.margin, 0)
        check_count("min_span", self.min_span)
        if self.block and self.warmup < 8 * self.block:
            raise ValueError(f"warmup ({self.warmup}) must hold at least 8 blocks of {self.block} observations")


class OneSidedCUSUM(Baselined):
    """What the two CUSUMs share: S and its threshold h, the reference and the level reported as "before",
    the warm-up's dispersion, and the observations since S was last 0 (the estimated change point)."""

    def __init__(self, config: CUSUMConfig):
        self.config = config
        self.arl0, self.ratio, self.margin, self.min_span = config.arl0, config.ratio, config.margin, config.min_span
        self.warmup, self.block, self.min_events = config.warmup, config.block, config.min_events
        super().__init__()
        self._dispersion = 1.0  # the last learned: a version test after a change uses it
        self._forget()

    def _forget(self) -> None:
        self._reference: float | None = None
        self._level = 0.0
        self._h = math.inf
        self._clear()

    def _clear(self) -> None:
        self._s = 0.0
        self._n, self._total = 0, 0.0  # observations since S was last 0, and their sum

    def _fire(self) -> None:
        self._drift = True
        self._change = Change(self._level, self._total / self._n, self._n)
        self.rebaseline()

    @property
    def reference(self) -> float | None:
        """The test's reference (None while warming up)."""
        return self._reference

    @property
    def dispersion(self) -> float:
        return self._dispersion

    @property
    def threshold(self) -> float:
        return self._h

    @property
    def statistic(self) -> float:
        return self._s

    def reset(self) -> "OneSidedCUSUM":
        self._drift, self._change, self._dispersion = False, None, 1.0
        self.rebaseline()
        return self


class BernoulliCUSUM(OneSidedCUSUM):
    """See the module docstring. ``update(x)`` takes one flag (1 accepted, 0 rejected)."""

    name = "cusum"

    def __init__(self, config: CUSUMConfig | None = None, **hyper):
        super().__init__(make_config(CUSUMConfig, config, hyper))
        self._up = self._down = 0.0

    # -- reference ------------------------------------------------------------------------------
    def _learn(self, warm: Warmup) -> None:
        mean = (warm.total + 0.5) / (warm.n + 1)  # never exactly 0 or 1
        dispersion = warm.dispersion(mean * (1 - mean), long=True)
        # the mean's error: requests differ, so the long scale's dispersion
        error = math.sqrt(dispersion * mean * (1 - mean) / warm.n)
        self._set(max(mean - self.margin * error, mean / 2), dispersion, mean)

    def baseline(self, reference: float, dispersion: float = 1.0) -> "BernoulliCUSUM":
        """Skip the warm-up: use this reference acceptance (and dispersion)."""
        check_open_fraction("reference", reference)
        check_at_least("dispersion", dispersion, 1)
        self._forget()
        self._warm = None
        self._set(reference, dispersion, reference)
        return self

    def _set(self, p0: float, dispersion: float, level: float) -> None:
        """Reference p0 of the test; ``level``: the acceptance reported as "before" a change."""
        self._reference, self._dispersion, self._level = p0, dispersion, level
        self._up, self._down, kl = flag_increments(p0, self.ratio, dispersion)
        self._h = threshold_for_arl(self.arl0, kl)

    # -- updates --------------------------------------------------------------------------------
    def update(self, x: float) -> "BernoulliCUSUM":
        self._drift = False
        if self._warm is not None and self._learning(x):
            return self
        if x:
            s = self._s + self._down
            if s <= 0.0:
                self._clear()
                return self
            self._s, self._n, self._total = s, self._n + 1, self._total + 1
        else:
            self._s += self._up
            self._n += 1
        if self._s > self._h and self._n >= self.min_span:
            self._fire()
        return self

    def update_step(self, accepted: int, rejected: bool) -> "BernoulliCUSUM":
        if self._warm is not None or self._s > self._h:  # warming up, or an alarm waiting for min_span
            return super().update_step(accepted, rejected)
        self._drift = False
        s = self._s + accepted * self._down
        if s <= 0.0:
            self._clear()
        else:
            self._s, self._n, self._total = s, self._n + accepted, self._total + accepted
        if rejected:
            self._s += self._up
            self._n += 1
            if self._s > self._h and self._n >= self.min_span:
                self._fire()
        return self
