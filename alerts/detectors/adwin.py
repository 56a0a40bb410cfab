"""ADWIN (Bifet and Gavalda 2007) on accept flags, from river: a backstop for drops of unknown size.

ADWIN keeps a window of recent flags and cuts it where two sub-windows' means differ by more than a
Hoeffding/Bernstein bound at confidence ``delta``; it needs no reference and no alternative. That bound
assumes independent flags. Its cut threshold grows with sqrt(variance x log(1 / delta)), so with a
long-run variance phi x the flags' variance (phi: the warm-up's dispersion, calibration.py) the same
guarantee needs about delta^phi, which is what the river detector is built with after the warm-up (the
warm-up's flags are then replayed into it, so the window starts full). river's ADWIN also cuts on rises;
with ``direction="down"`` only drops are reported.
"""

from __future__ import annotations

from dataclasses import dataclass

from river.drift import ADWIN

from alerts.detectors.base import Baselined, Change, make_config
from alerts.detectors.calibration import Warmup
from alerts.detectors.checks import check_choice, check_count, check_open_fraction


@dataclass(frozen=True)
class ADWINConfig:
    """``delta``: ADWIN's confidence for independent flags (smaller: fewer false alarms, later
    detection). ``clock``: flags between two checks for a cut. ``warmup``/``block``: the dispersion
    estimate. ``direction``: "down" reports drops only, "both" any cut."""

    delta: float = 1e-7
    clock: int = 32
    warmup: int = 2000
    block: int = 16
    min_events: int = 30
    direction: str = "down"

    def __post_init__(self) -> None:
        check_open_fraction("delta", self.delta)
        check_count("clock", self.clock)
        check_count("warmup", self.warmup, 10)
        check_count("block", self.block, 0)
        check_count("min_events", self.min_events, 0)
        if self.block and self.warmup < 8 * self.block:
            raise ValueError(f"warmup ({self.warmup}) must hold at least 8 blocks of {self.block} flags")
        check_choice("direction", self.direction, ("down", "both"))


class ADWINDetector(Baselined):
    """See the module docstring. ``update(x)`` takes one flag (or any value in [0, 1])."""

    name = "adwin"

    def __init__(self, config: ADWINConfig | None = None, **hyper):
        self.config = make_config(ADWINConfig, config, hyper)
        self.delta, self.clock, self.direction = self.config.delta, self.config.clock, self.config.direction
        self.warmup, self.block, self.min_events = self.config.warmup, self.config.block, self.config.min_events
        super().__init__()
        self._dispersion = 1.0
        self._forget()

    def _forget(self) -> None:
        self._adwin: ADWIN | None = None
        self._buffer: list[float] = []  # the warm-up's flags, replayed into ADWIN when it is built
        self._n, self._total = 0, 0.0  # ADWIN's window (river keeps it until a cut)

    def _learn(self, warm: Warmup) -> None:
        self._dispersion = warm.dispersion(warm.variance, long=True)  # ADWIN's windows are long
        self._adwin = ADWIN(delta=self.delta ** self._dispersion, clock=self.clock)
        buffer, self._buffer = self._buffer, []
        for x in buffer:
            self._feed(x, report=False)

    @property
    def dispersion(self) -> float:
        return self._dispersion

    @property
    def effective_delta(self) -> float | None:
        return self._adwin.delta if self._adwin is not None else None

    def update(self, x: float) -> "ADWINDetector":
        self._drift = False
        if self._warm is not None:
            self._buffer.append(x)
            self._learning(x)
            return self
        self._feed(x, report=True)
        return self

    def update_step(self, accepted: int, rejected: bool) -> "ADWINDetector":
        if self._warm is not None:
            return super().update_step(accepted, rejected)
        self._drift = False
        adwin, count = self._adwin, accepted + rejected
        update, counted = adwin.update, 0  # flags of this step already in self._n / self._total
        for i in range(count):
            update(1 if i < accepted else 0)
            if adwin.drift_detected:
                self._n += i + 1 - counted
                self._total += min(i + 1, accepted) - min(counted, accepted)
                counted = i + 1
                self._cut(adwin, report=True)
                if self._drift:  # re-baselining: the step's remaining flags start the warm-up
                    change = self._change
                    self.update_many([1 if j < accepted else 0 for j in range(i + 1, count)])
                    self._drift, self._change = True, change
                    return self
        self._n += count - counted
        self._total += accepted - min(counted, accepted)
        return self

    def _feed(self, x: float, report: bool) -> None:
        adwin = self._adwin
        adwin.update(x)
        self._n += 1
        self._total += x
        if adwin.drift_detected:
            self._cut(adwin, report)

    def _cut(self, adwin: ADWIN, report: bool) -> None:
        width, total = adwin.width, adwin.total
        after = total / width if width else 0.0
        dropped = self._n - width
        before = (self._total - total) / dropped if dropped > 0 else after
        # river resets the whole window at the next update after a cut
        self._n, self._total = 0, 0.0
        if report and (self.direction == "both" or after < before):
            self._drift = True
            self._change = Change(before, after, int(width))
            self.rebaseline()

    @property
    def statistic(self) -> float:
        """The mean of ADWIN's window (the warm-up's mean while warming up)."""
        if self._warm is not None:
            return self._warm.mean
        return self._total / self._n if self._n else 0.0

    def reset(self) -> "ADWINDetector":
        self._drift, self._change, self._dispersion = False, None, 1.0
        self.rebaseline()
        return self
