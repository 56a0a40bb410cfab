"""The detector interface, river-style: ``update(x)`` returns the detector, ``drift_detected`` tells whether
that update confirmed a change, after which the detector re-baselines by itself.

Observations are per drafted position, counted up to and including the first rejection of a step: a 0/1
accept flag, or the expected acceptance sum_x min(p(x), q(x)) there. Detectors watch for acceptance
falling; a rise is not an alert.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Iterable

from alerts.detectors.calibration import Warmup


@dataclass(frozen=True, slots=True)
class Change:
    """A confirmed change: the level before (the reference), the level since the estimated change point,
    and how many observations that estimate rests on."""

    before: float
    after: float
    observations: int


class Detector(ABC):
    """One detector of one stream. Not thread-safe: the caller serialises updates."""

    name = "detector"

    def __init__(self) -> None:
        self._drift = False
        self._change: Change | None = None

    @abstractmethod
    def update(self, x: float) -> "Detector":
        """Take one observation; returns self."""

    @property
    def drift_detected(self) -> bool:
        """True right after the update that confirmed a change (the state has re-baselined since)."""
        return self._drift

    @property
    def change(self) -> Change | None:
        """The last confirmed change (set with ``drift_detected``; kept until the next one or a reset)."""
        return self._change

    @property
    @abstractmethod
    def statistic(self) -> float:
        """The current test statistic (exported as a gauge)."""

    @abstractmethod
    def reset(self) -> "Detector":
        """Forget everything learned, including the reference; returns self."""

    @property
    def warming_up(self) -> bool:
        """True while the detector is still learning its reference (it cannot fire then)."""
        return False

    def update_many(self, values: Iterable[float]) -> "Detector":
        """Several observations in order; ``drift_detected`` tells whether any of them confirmed a change."""
        fired, change = False, None
        for x in values:
            self.update(x)
            if self._drift:
                fired, change = True, self._change
        self._drift = fired
        if fired:
            self._change = change
        return self

    def update_step(self, accepted: int, rejected: bool) -> "Detector":
        """The flags of one speculative step: ``accepted`` ones, then a zero if a drafted token was
        rejected. Flag detectors may override this with an exact O(1) form."""
        return self.update_many([1] * accepted + [0] * rejected)


class Baselined(Detector):
    """A detector that learns its reference from a warm-up (again after each confirmed change): at least
    ``warmup`` observations and until it has seen ``min_events`` acceptances and as many rejections (for
    expected acceptance e: sums of e and of 1 - e). The rarer outcome sets how well the reference is known
    (relative error about 1 / sqrt(events)): 1000 flags at acceptance 0.99 hold about 10 rejections, too
    few to tell 0.99 from 0.997. ``block`` is the block length of the warm-up's dispersion estimate."""

    warmup: int
    block: int
    min_events: int

    def __init__(self) -> None:
        super().__init__()
        self._warm: Warmup | None = Warmup(self.block)

    @abstractmethod
    def _learn(self, warm: Warmup) -> None:
        """Set the reference and threshold from a finished warm-up."""

    def _learning(self, x: float) -> bool:
        """Feed ``x`` to the warm-up if one is running; True when it took it."""
        warm = self._warm
        if warm is None:
            return False
        warm.add(x)
        if warm.n >= self.warmup and min(warm.total, warm.n - warm.total) >= self.min_events:
            self._warm = None
            self._learn(warm)
        return True

    @abstractmethod
    def _forget(self) -> None:
        """Drop the reference, threshold and statistic (not what outlives a change: dispersion, theta)."""

    def rebaseline(self) -> "Baselined":
        """Learn the reference again from the next ``warmup`` observations, as after a confirmed change."""
        self._forget()
        self._warm = Warmup(self.block)
        return self

    @property
    def warming_up(self) -> bool:
        return self._warm is not None


def make_config(kind: type, config: object | None, hyper: dict) -> object:
    """A detector's config: the one given, or one built from keyword hyper-parameters (validated)."""
    if config is not None and hyper:
        raise TypeError(f"pass a {kind.__name__} or keyword hyper-parameters, not both")
    if config is not None and not isinstance(config, kind):
        raise TypeError(f"config must be a {kind.__name__}, got {type(config).__name__}")
    return config if config is not None else kind(**hyper)
