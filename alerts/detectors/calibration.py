"""Thresholds from a target false-alarm interval, and what a warm-up learns.

A one-sided CUSUM ``S = max(0, S + y)`` with log-likelihood-ratio increments ``y`` raises an alarm when S
exceeds h. Under the reference (no change) the increments drift down by ``kl`` per observation (the
Kullback-Leibler divergence of the reference from the alternative), and the average run length to a false
alarm, ARL0, follows Siegmund's Brownian approximation (Siegmund 1985, "Sequential Analysis", ch. X):

    ARL0 ~= (e^u - u - 1) / kl,   u = h + overshoot

``threshold_for_arl`` inverts it: h = u - overshoot. So ARL0 grows like e^h, and the delay after a change to
the alternative is about h / KL(alternative || reference). For a normal mean shift of delta standard
deviations, kl = delta^2 / 2 and Siegmund's overshoot correction is 1.166 delta. For 0/1 flags we use no
correction: the exact ARL0 (``bernoulli_cusum_arl``, a Markov chain) is 1.5-4x the approximation for the
shifts used here (tests/alerts/test_detector_calibration.py), so the target is a floor, not a promise.

Correlated observations (accept flags inside one request are) break the independence behind the relation:
a run of rejections inside one hard passage moves S further than independent flags would. A warm-up
therefore measures the dispersion phi = (variance of block means x block length) / (per-observation
variance), 1 for independent data; when it is significantly above 1, detectors divide their increments by
phi (a quasi-likelihood CUSUM, equivalent to using the long-run variance), which keeps the exponent of the
relation, and aim at arl0 with kl / phi.
"""

from __future__ import annotations

import math
from typing import Sequence

NORMAL_OVERSHOOT = 1.166  # Siegmund's correction for a normal CUSUM, in units of the shift delta


def bernoulli_kl(p: float, q: float) -> float:
    """KL(Bernoulli(p) || Bernoulli(q)) in nats."""
    out = 0.0
    if p > 0:
        out += p * math.log(p / q)
    if p < 1:
        out += (1 - p) * math.log((1 - p) / (1 - q))
    return out


def _excess(u: float) -> float:
    return math.expm1(u) - u


def arl_approx(h: float, kl: float, overshoot: float = 0.0) -> float:
    """Siegmund's ARL0 of a CUSUM with threshold ``h`` whose increments drift down by ``kl``."""
    return _excess(h + overshoot) / kl


def threshold_for_arl(arl0: float, kl: float, overshoot: float = 0.0) -> float:
    """The threshold h with ``arl_approx(h, kl, overshoot) == arl0`` (at least a tiny positive number)."""
    if not arl0 > 0 or not kl > 0:
        raise ValueError(f"arl0 and kl must be positive, got {arl0!r} and {kl!r}")
    target = arl0 * kl
    lo, hi = 0.0, 1.0
    while _excess(hi) < target:
        lo, hi = hi, hi * 2
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _excess(mid) < target else (lo, mid)
    return max(hi - overshoot, 1e-6)


def bernoulli_cusum_arl(h: float, p: float, up: float, down: float, grid: int = 1000) -> float:
    """Exact (up to a grid of ``grid`` cells) expected observations to an alarm of ``S = max(0, S + y)``,
    y = ``down`` for a 1 (probability ``p``) and ``up`` for a 0, from S = 0 (Brook and Evans' Markov chain).

    With p the reference this is ARL0; with p the alternative, the delay of a change at the start."""
    import numpy as np

    if not (up > 0 > down and h > 0 and 0 <= p <= 1):
        raise ValueError("need up > 0 > down, h > 0 and p in [0, 1]")
    cell = h / grid
    states = np.arange(grid)
    # a state is the cell index of S; rounding the increments to whole cells keeps the chain on the grid
    to_up = np.floor(states + up / cell + 0.5).astype(int)
    to_down = np.maximum(np.floor(states + down / cell + 0.5).astype(int), 0)
    a = np.eye(grid)
    rows = states[to_up < grid]
    a[rows, to_up[rows]] -= 1 - p
    np.subtract.at(a, (states, to_down), p)
    return float(np.linalg.solve(a, np.ones(grid))[0])


class BlockMeans:
    """Means of consecutive blocks of ``size`` observations: their variance times ``size`` over the
    per-observation variance is the dispersion at that scale (1 for independent observations)."""

    __slots__ = ("size", "_sum", "_n", "blocks", "total", "squares")

    def __init__(self, size: int):
        self.size = size
        self._sum, self._n = 0.0, 0
        self.blocks, self.total, self.squares = 0, 0.0, 0.0

    def add(self, x: float) -> None:
        self._sum += x
        self._n += 1
        if self._n == self.size:
            m = self._sum / self.size
            self.blocks += 1
            self.total += m
            self.squares += m * m
            self._sum, self._n = 0.0, 0

    def dispersion(self, variance: float, z: float) -> float:
        """The dispersion when it exceeds 1 by ``z`` standard errors (chi-square approximation,
        sqrt(2 / (blocks - 1))); 1 otherwise or with fewer than 8 blocks."""
        b = self.blocks
        if b < 8 or variance <= 0:
            return 1.0
        phi = max(self.squares - self.total ** 2 / b, 0.0) / (b - 1) * self.size / variance
        return phi if phi > 1 + z * math.sqrt(2 / (b - 1)) else 1.0


class Warmup:
    """Count, mean, variance and block means of the observations a detector learns its reference from, at
    two scales: ``block`` (a few steps: runs of rejections inside a passage) and 4 x ``block`` (about a
    request: requests differ from each other)."""

    __slots__ = ("block", "n", "total", "squares", "_scales")

    def __init__(self, block: int):
        self.block = block  # 0: no blocks, dispersion is taken as 1
        self.n = 0
        self.total = self.squares = 0.0
        self._scales = (BlockMeans(block), BlockMeans(4 * block)) if block else ()

    def add(self, x: float) -> None:
        self.n += 1
        self.total += x
        self.squares += x * x
        for scale in self._scales:
            scale.add(x)

    @property
    def mean(self) -> float:
        return self.total / self.n if self.n else 0.0

    @property
    def variance(self) -> float:
        """Sample variance of the observations."""
        if self.n < 2:
            return 0.0
        return max(self.squares - self.total * self.total / self.n, 0.0) / (self.n - 1)

    def dispersion(self, variance: float, long: bool = False, z: float = 2.0) -> float:
        """phi at the short scale (``long``: the larger of both), 1 when not significantly above 1."""
        if not self._scales:
            return 1.0
        short = self._scales[0].dispersion(variance, z)
        return max(short, self._scales[1].dispersion(variance, z)) if long else short


def flag_increments(p0: float, ratio: float, dispersion: float = 1.0) -> tuple[float, float, float]:
    """(up, down, kl) for 0/1 flags, reference ``p0``, alternative ``ratio`` x p0: the log-likelihood ratio
    of a rejected (up > 0) and an accepted (down < 0) flag and the downward drift under p0, each divided by
    ``dispersion``."""
    p1 = ratio * p0
    up, down = math.log((1 - p1) / (1 - p0)), math.log(p1 / p0)
    return up / dispersion, down / dispersion, bernoulli_kl(p0, p1) / dispersion


def expected_theta(values: Sequence[float], p0: float, ratio: float, dispersion: float = 1.0) -> float:
    """The scale theta > 0 with mean(exp(theta y(e))) = 1 over ``values`` e, y(e) the expected flag
    log-likelihood ratio (see expected_increments): then theta y has the exponential-martingale property a
    likelihood ratio has, so the relation above holds for it with independent values whatever their
    distribution (skewed e near 1 has a long tail towards 0). Divided by ``dispersion`` for correlated
    values, as the Brownian approximation 2 KL / long-run variance would be."""
    import numpy as np

    up, down, kl = flag_increments(p0, ratio)
    y = up + (down - up) * np.asarray(values, dtype=float)
    if len(y) < 2 or y.mean() >= 0:  # p0 is not these values' mean: the Brownian approximation
        return min(2 * kl / max(float(y.var()) if len(y) > 1 else 0.0, 1e-12), MAX_THETA) / dispersion
    if y.max() <= 0:  # nothing ever pushes the statistic up: any theta works, take a large one
        return MAX_THETA / dispersion

    def excess(theta: float) -> float:
        return float(np.mean(np.exp(theta * y))) - 1.0

    lo, hi = 0.0, 1.0
    while excess(hi) < 0 and hi < MAX_THETA:
        lo, hi = hi, hi * 2
    hi = min(hi, MAX_THETA)
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if excess(mid) < 0 else (lo, mid)
    return lo / dispersion


MAX_THETA = 200.0


def expected_increments(p0: float, ratio: float, theta: float) -> tuple[float, float, float]:
    """(intercept, slope, kl) for expected-acceptance values e: increments intercept + slope x e are
    theta x y(e), y(e) = e log(p1 / p0) + (1 - e) log((1 - p1) / (1 - p0)) the flag log-likelihood ratio's
    expectation given e (p1 = ratio x p0); kl is their downward drift when the mean of e is p0."""
    up, down, kl = flag_increments(p0, ratio)
    return theta * up, theta * (down - up), theta * kl
