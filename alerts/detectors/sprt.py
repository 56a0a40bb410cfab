"""Wald's sequential probability ratio test (SPRT) of acceptance after a version change against the
baseline before it: the stale-draft test.

H0: acceptance after = reference (the baseline before the change); H1: after = ratio x reference. The
log-likelihood ratio L of H1 against H0 adds up observation by observation; L >= log((1 - beta) / alpha)
accepts H1 (a drop: the draft is stale for the new version), L <= log(beta / (1 - alpha)) accepts H0 (no
drop). Wald's bounds: a false drop with probability <= alpha per version change, a missed drop of the full
size with probability <= beta. ``min_observations`` guard against deciding on a handful of tokens;
after ``max_observations`` without a decision the test concludes "no drop" (acceptance somewhere between).
Increments are those of the CUSUMs (calibration.py), divided by the baseline's dispersion, so correlated
flags do not make the bounds optimistic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from alerts.detectors.base import Change, Detector, make_config
from alerts.detectors.calibration import expected_increments, flag_increments
from alerts.detectors.checks import check_at_least, check_count, check_open_fraction, check_positive

DROP, NO_DROP = "drop", "no drop"


@dataclass(frozen=True)
class SPRTConfig:
    """``ratio``: the drop to confirm, as after / before. ``alpha``: false stale-draft findings per
    version change. ``beta``: missed drops of that size. Observations: flags or expected-acceptance values."""

    ratio: float = 0.8
    alpha: float = 1e-3
    beta: float = 1e-3
    min_observations: int = 30
    max_observations: int = 20_000

    def __post_init__(self) -> None:
        for name in ("ratio", "alpha", "beta"):
            check_open_fraction(name, getattr(self, name))
        check_count("min_observations", self.min_observations)
        check_count("max_observations", self.max_observations)
        if self.max_observations < self.min_observations:
            raise ValueError(f"max_observations ({self.max_observations}) must be >= min_observations "
                             f"({self.min_observations})")


class SequentialTest(Detector):
    """One test per version change; ``drift_detected`` on the update that confirms the drop, ``decision``
    once decided (later updates are ignored until ``reset``). Increments: intercept + slope x x."""

    name = "stale-draft"

    def __init__(self, reference: float, intercept: float, slope: float, config: SPRTConfig):
        super().__init__()
        self.config = config
        self.ratio, self.alpha, self.beta = config.ratio, config.alpha, config.beta
        self.min_observations, self.max_observations = config.min_observations, config.max_observations
        self.reference = reference
        self._intercept, self._slope = intercept, slope
        self._upper = math.log((1 - self.beta) / self.alpha)
        self._lower = math.log(self.beta / (1 - self.alpha))
        self.reset()

    def update(self, x: float) -> "SequentialTest":
        self._drift = False
        if self._decision is not None:
            return self
        self._llr += self._intercept + self._slope * x
        self._n += 1
        self._total += x
        if self._n < self.min_observations:
            return self
        if self._llr >= self._upper:
            self._decision, self._drift = DROP, True
            self._change = Change(self.reference, self._total / self._n, self._n)
        elif self._llr <= self._lower or self._n >= self.max_observations:
            self._decision = NO_DROP
        return self

    @property
    def upper(self) -> float:
        """The statistic at or above which a drop is confirmed: log((1 - beta) / alpha)."""
        return self._upper

    @property
    def lower(self) -> float:
        """The statistic at or below which "no drop" is concluded: log(beta / (1 - alpha))."""
        return self._lower

    @property
    def decision(self) -> str | None:
        """None while undecided, then "drop" or "no drop"."""
        return self._decision

    @property
    def observations(self) -> int:
        return self._n

    @property
    def mean(self) -> float:
        """Mean of the observations since the change."""
        return self._total / self._n if self._n else 0.0

    @property
    def statistic(self) -> float:
        return self._llr

    def reset(self) -> "SequentialTest":
        """Start the test again (same reference)."""
        self._drift, self._change = False, None
        self._llr, self._n, self._total = 0.0, 0, 0.0
        self._decision: str | None = None
        return self


class BernoulliSPRT(SequentialTest):
    """The test on accept flags; ``reference`` is the acceptance before the change."""

    def __init__(self, reference: float, dispersion: float = 1.0, config: SPRTConfig | None = None, **hyper):
        check_open_fraction("reference", reference)
        check_at_least("dispersion", dispersion, 1)
        config = make_config(SPRTConfig, config, hyper)
        up, down, _ = flag_increments(reference, config.ratio, dispersion)
        super().__init__(reference, up, down - up, config)


class ExpectedSPRT(SequentialTest):
    """The test on expected-acceptance values; ``reference`` is their mean before the change and
    ``theta`` the scale learned before it (expected_cusum.py, calibration.expected_theta)."""

    def __init__(self, reference: float, theta: float, config: SPRTConfig | None = None, **hyper):
        check_open_fraction("reference", reference)
        check_positive("theta", theta)
        config = make_config(SPRTConfig, config, hyper)
        intercept, slope, _ = expected_increments(reference, config.ratio, theta)
        super().__init__(reference, intercept, slope, config)
