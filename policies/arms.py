"""Exponentially discounted per-arm statistics of one domain (arms: lookaheads 0..kmax).

Every step of the domain multiplies all of its arms' sums by ``gamma`` and adds the new step to its arm,
so a step t steps old weighs gamma^t and an arm pulled every step holds at most 1 / (1 - gamma) effective
steps. Goodput is a ratio of sums (discounted tokens over discounted seconds), never a mean of per-step
ratios, which would over-weight short steps.

Discounting all arms every step is done lazily: step t is added with weight ``scale = gamma^-t`` and a read
divides by ``scale`` (ratios need no correction at all), so an update is O(1) whatever kmax is. ``scale``
is folded back into the sums before it can overflow.
"""

from __future__ import annotations

import math
from typing import Iterable

_RESCALE_AT = 1e100


class DiscountedArms:
    """Discounted n, sum emitted, sum seconds and second moments per arm.

    The lists ``n, e, s, ee, es, ss`` (indexed by arm) hold the discounted sums times ``scale``: ratios of
    them need no correction, counts do (``count``). The second moments (emitted², emitted·seconds,
    seconds²) give the variance of the ratio estimator by the delta method, with emitted and seconds
    allowed to be correlated: see ``residual_var``.
    """

    __slots__ = ("gamma", "steps", "scale", "n", "e", "s", "ee", "es", "ss")

    def __init__(self, narms: int, gamma: float):
        if not 0.0 < gamma <= 1.0:
            raise ValueError(f"gamma must be in (0, 1], got {gamma!r}")
        self.gamma = gamma
        self.steps = 0  # undiscounted steps of the domain, for reasons and logs
        self.scale = 1.0
        self.n = [0.0] * narms
        self.e = [0.0] * narms
        self.s = [0.0] * narms
        self.ee = [0.0] * narms
        self.es = [0.0] * narms
        self.ss = [0.0] * narms

    def push(self, k: int, emitted: float, seconds: float) -> None:
        """One step of arm ``k``; every arm of the domain is discounted by ``gamma`` first."""
        w = self.scale / self.gamma
        if w > _RESCALE_AT:
            self._rescale()
            w = 1.0 / self.gamma
        self.scale = w
        self.steps += 1
        self.n[k] += w
        self.e[k] += w * emitted
        self.s[k] += w * seconds
        self.ee[k] += w * emitted * emitted
        self.es[k] += w * emitted * seconds
        self.ss[k] += w * seconds * seconds

    def add_totals(self, k: int, steps: float, emitted: float, seconds: float, *,
                   cap: float = math.inf, cv: float = 0.5) -> None:
        """Add stored totals of arm ``k`` (a warm start) as ``steps`` steps at their mean, not discounted.

        History older than the memory would otherwise swamp fresh steps, so it counts as at most ``cap``
        steps. Totals carry no second moments: per-step goodput is assumed to vary with coefficient of
        variation ``cv`` around the mean.
        """
        if steps <= 0 or seconds <= 0:
            return
        f = min(1.0, cap / steps) * self.scale
        me, ms = emitted / steps, seconds / steps
        m = steps * f
        self.n[k] += m
        self.e[k] += m * me
        self.s[k] += m * ms
        self.ee[k] += m * me * me * (1.0 + cv * cv)
        self.es[k] += m * me * ms
        self.ss[k] += m * ms * ms

    def count(self, k: int) -> float:
        """Discounted number of steps of arm ``k``."""
        return self.n[k] / self.scale

    def goodput(self, k: int) -> float:
        """Tokens per second of arm ``k`` (ratio of discounted sums); 0 without data."""
        s = self.s[k]
        return self.e[k] / s if s > 0 else 0.0

    def mean_seconds(self, k: int) -> float:
        n = self.n[k]
        return self.s[k] / n if n > 0 else 0.0

    def residual_var(self, k: int) -> float:
        """Per-step variance of d = emitted - R * seconds, R the arm's goodput.

        The ratio estimator R has variance about residual_var / (n * mean_seconds²) (delta method).
        """
        n, s = self.n[k], self.s[k]
        if n <= 0 or s <= 0:
            return 0.0
        r = self.e[k] / s
        return max(0.0, (self.ee[k] - 2.0 * r * self.es[k] + r * r * self.ss[k]) / n)

    def _rescale(self) -> None:
        inv = 1.0 / self.scale
        for a in (self.n, self.e, self.s, self.ee, self.es, self.ss):
            for i in range(len(a)):
                a[i] *= inv
        self.scale = 1.0


def restricted(arms: Iterable[int], kmax: int) -> tuple[int, ...]:
    """The lookaheads among ``arms`` (the pools that are up) a policy of ``kmax`` can choose, sorted."""
    arms = list(arms)
    chosen = tuple(sorted({k for k in arms if 0 <= k <= kmax}))
    if not chosen:
        raise ValueError(f"restrict: no arm in 0..{kmax} among {arms!r}")
    return chosen


def arm_of(arm: int | str, kmax: int) -> int:
    """The lookahead an arm names: a K in 0..kmax, or a pool name ``off`` (0) / ``kN`` (N)."""
    k = arm
    if isinstance(arm, str):
        k = 0 if arm == "off" else int(arm[1:]) if arm[:1] == "k" and arm[1:].isdigit() else None
    if type(k) is not int or not 0 <= k <= kmax:
        raise ValueError(f"arm must be a K in 0..{kmax} or a pool name off / kN, got {arm!r}")
    return k
