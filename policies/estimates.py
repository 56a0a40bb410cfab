"""Sums that fade with a halflife counted in a domain's steps (lazily: decayed only when touched), and
``shrink``, a mean pulled toward a prior by pseudo-observations (free of sklearn: the proxy imports it)."""

from __future__ import annotations

import math
from typing import Sequence


class DecayingSums:
    """Weight, numerator and denominator sums (and their second moments, for a standard error), each
    multiplied by 2^(-elapsed / halflife)."""

    __slots__ = ("halflife", "_n", "_num", "_den", "_nn", "_dd", "_nd", "_at", "_one")

    def __init__(self, halflife: float):
        if not halflife > 0:
            raise ValueError(f"halflife must be positive, got {halflife!r}")
        self.halflife = float(halflife)
        self._n = self._num = self._den = self._nn = self._dd = self._nd = 0.0
        self._at = 0
        self._one = math.exp2(-1.0 / self.halflife)  # the factor of one step, the common case

    def _decay(self, step: int) -> None:
        if step != self._at:
            elapsed = step - self._at
            f = self._one if elapsed == 1 else math.exp2(-elapsed / self.halflife)
            self._n, self._num, self._den = self._n * f, self._num * f, self._den * f
            self._nn, self._dd, self._nd, self._at = self._nn * f, self._dd * f, self._nd * f, step

    def add(self, step: int, numerator: float, denominator: float) -> None:
        # The decay written out (the same arithmetic as ``_decay`` then adding): this runs several times a step.
        f = 1.0
        if step != self._at:
            elapsed = step - self._at
            f = self._one if elapsed == 1 else math.exp2(-elapsed / self.halflife)
            self._at = step
        self._n = self._n * f + 1.0
        self._num = self._num * f + numerator
        self._den = self._den * f + denominator
        self._nn = self._nn * f + numerator * numerator
        self._dd = self._dd * f + denominator * denominator
        self._nd = self._nd * f + numerator * denominator

    def seed(self, step: int, weight: float, numerator: float, denominator: float,
             max_halflives: float = 2.0) -> None:
        """Add stored totals, scaled down to at most ``max_halflives`` halflives' worth of steps."""
        cap = max_halflives * self.halflife / math.log(2)
        scale = min(1.0, cap / weight) if weight > 0 else 0.0
        self._decay(step)
        self._n += weight * scale
        self._num += numerator * scale
        self._den += denominator * scale
        # Stored totals carry no spread: assume each step equal to the mean (a small standard error).
        if weight > 0:
            self._nn += scale * numerator * numerator / weight
            self._dd += scale * denominator * denominator / weight
            self._nd += scale * numerator * denominator / weight

    def scale(self, step: int, factor: float) -> None:
        """Multiply every sum by ``factor`` in (0, 1]: the same mean and spread, as if ``factor`` times as many
        observations had measured them (its standard error grows by 1 / sqrt(factor))."""
        self._decay(step)
        self._n, self._num, self._den = self._n * factor, self._num * factor, self._den * factor
        self._nn, self._dd, self._nd = self._nn * factor, self._dd * factor, self._nd * factor

    def weight(self, step: int) -> float:
        self._decay(step)
        return self._n

    def ratio(self, step: int) -> float:
        self._decay(step)
        return self._num / self._den if self._den > 0 else 0.0

    def stderr(self, step: int) -> float:
        """Standard error of ``ratio`` by the delta method: sqrt(Var(num - R den) / n) / mean(den)."""
        self._decay(step)
        n, den = self._n, self._den
        if n <= 1 or den <= 0:
            return math.inf
        r = self._num / den
        resid = (self._nn - 2 * r * self._nd + r * r * self._dd) / n  # E[(num - R den)^2]
        return math.sqrt(max(resid, 0.0) / (n - 1)) / (den / n)

    def moments(self, step: int) -> tuple[float, float, float, float, float, float]:
        """The discounted sums at ``step``: weight, numerator, denominator, numerator², denominator² and
        numerator x denominator (what a weighted least-squares line of numerator on denominator needs)."""
        self._decay(step)
        return self._n, self._num, self._den, self._nn, self._dd, self._nd

    def read(self, step: int) -> tuple[float, float]:
        """``(weight, ratio)`` at ``step`` in one call (the switch reads both every step)."""
        if step != self._at:
            self._decay(step)
        den = self._den
        return self._n, (self._num / den if den > 0 else 0.0)


def shrink(sums: Sequence[float], weights: Sequence[float], trend: Sequence[float],
           prior_strength: float) -> list[float]:
    """Each entry's mean pulled toward ``trend`` by ``prior_strength`` pseudo-observations m:
    (sum + m trend) / (weight + m). Well-measured entries keep their own mean; unmeasured ones the trend."""
    m = prior_strength
    return [(s + m * t) / (w + m) for s, w, t in zip(sums, weights, trend)]
