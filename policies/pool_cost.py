"""What a step of one pool costs, as a line in the tokens it drafted, learnt from every domain's requests.

A pool named kN caps what a step drafts; what each step drafts varies (llama.cpp's n-gram self-speculation
drafts 0..N a step, a draft model stops early at low confidence), and verifying 25 tokens costs more than
verifying 1. So a pool's seconds per step are a line in its drafted tokens per step:

    seconds / steps = alpha + beta * drafted / steps

alpha (a step that drafted nothing: one target pass, plus any per-step overhead) and beta (each drafted
token drafted and verified) belong to the pool and the machine, not to the domain: every domain's requests
measure them, and ``off`` (alpha alone) is measured once for all domains. How many tokens a step drafts is
the domain's, learnt apart (policies/pool_rates.py).

Each request is one observation (x, y) = (drafted / steps, seconds / steps): a request's time varies by a
load factor, so its per-step time has about the same relative spread whatever its length. The sums are
discounted per request of all domains (load and hardware drift slowly), in ``DecayingSums``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from policies.estimates import DecayingSums

RIDGE = 1.0  # pseudo-weight (tokens² of spread) pulling the slope toward 0 while drafted per step barely varies
PRIOR_WEIGHT = 2.0  # requests' worth of the prior noise, so one or two requests do not look exact
PRIOR_REL_SD = 0.15  # the prior's relative spread of one request's seconds per step
ALPHA_FLOOR = 0.1  # alpha is at least this share of the mean seconds per step: a step is never free
UNMEASURED_REL_SD = 0.1  # relative spread of the line a pool no request has measured is given


@dataclass(frozen=True, slots=True)
class Line:
    """A fitted cost line: ``alpha`` + ``beta`` x seconds per step at x drafted tokens per step, from
    ``weight`` requests centred on ``x_mean``; ``spread``: their centred sum of squares of x (plus the
    ridge); ``noise``: the variance of one request's seconds per step around the line."""

    alpha: float
    beta: float
    weight: float
    x_mean: float
    spread: float
    noise: float

    def seconds(self, x: float) -> float:
        """Seconds per step at ``x`` drafted tokens per step."""
        return self.alpha + self.beta * x

    def stderr(self, x: float) -> float:
        """Standard error of ``seconds(x)``: the mean's and the slope's, wider away from the measured x."""
        return math.sqrt(self.noise * (1.0 / self.weight + (x - self.x_mean) ** 2 / self.spread))


def fit_line(w: float, sy: float, sx: float, syy: float, sxx: float, sxy: float, ridge: float = RIDGE) -> Line | None:
    """Weighted least squares of y on x from the sums (weight, Σy, Σx, Σy², Σx², Σxy); None without weight.

    The slope is ridge-shrunk toward 0 (a pool whose steps always draft its K, a fixed-K draft model, leaves
    it unidentified, and predictions there are made at that K anyway) and kept >= 0 (verifying more never
    costs less); alpha is kept at least ``ALPHA_FLOOR`` of the mean. The noise is the residual variance
    pooled with ``PRIOR_WEIGHT`` requests of ``PRIOR_REL_SD`` relative spread.
    """
    if not w > 1e-9:
        return None
    x_mean, y_mean = sx / w, sy / w
    cxx = max(sxx - w * x_mean * x_mean, 0.0)
    cxy = sxy - w * x_mean * y_mean
    beta = max(0.0, cxy / (cxx + ridge))
    alpha = y_mean - beta * x_mean
    floor = ALPHA_FLOOR * y_mean
    if alpha < floor:
        alpha = floor
        beta = (y_mean - alpha) / x_mean if x_mean > 0 else 0.0
    rss = (syy - 2.0 * alpha * sy - 2.0 * beta * sxy + alpha * alpha * w + 2.0 * alpha * beta * sx
           + beta * beta * sxx)
    noise = (max(rss, 0.0) + PRIOR_WEIGHT * (PRIOR_REL_SD * y_mean) ** 2) / (w + PRIOR_WEIGHT)
    return Line(alpha, beta, w, x_mean, cxx + ridge, noise)


class PoolCosts:
    """One discounted cost line per pool (by K), on a clock of requests of all domains."""

    def __init__(self, halflife: float):
        self.halflife = halflife
        self._clock = 0
        self._sums: dict[int, DecayingSums] = {}
        self._lines: dict[int | None, Line | None] = {}  # fitted lines (None: the prior), until the next write

    def add(self, k: int, steps: float, drafted: float, seconds: float) -> None:
        self._lines.clear()
        self._clock += 1
        sums = self._sums.get(k)
        if sums is None:
            sums = self._sums[k] = DecayingSums(self.halflife)
        sums.add(self._clock, seconds / steps, drafted / steps)

    def line(self, k: int) -> Line | None:
        """Pool ``k``'s line, or None while no request measured it."""
        if k not in self._lines:
            sums = self._sums.get(k)
            self._lines[k] = None if sums is None else fit_line(*sums.moments(self._clock))
        return self._lines[k]

    def prior(self) -> Line | None:
        """An optimistic line for a pool no request has measured, from those measured (None: none is).

        alpha: the least of theirs and of the line through their means (a pool that always drafts its K
        leaves its own alpha with the whole step, but the line across pools of K = 2, 4, 8 reaches K = 0 at
        about a plain step); beta: the least of the speculative pools'. So ``off`` is predicted about as fast
        as a step that drafts nothing, and a new pool as cheap per drafted token as the cheapest."""
        if None not in self._lines:
            self._lines[None] = self._prior()
        return self._lines[None]

    def _prior(self) -> Line | None:
        lines = {k: line for k in self._sums if (line := self.line(k)) is not None}
        if not lines:
            return None
        alpha = min(line.alpha for line in lines.values())
        points = [(line.x_mean, line.seconds(line.x_mean)) for line in lines.values()]
        if len({x for x, _ in points}) > 1:
            across = fit_line(float(len(points)), sum(y for _, y in points), sum(x for x, _ in points),
                              sum(y * y for _, y in points), sum(x * x for x, _ in points),
                              sum(x * y for x, y in points), ridge=1e-9)
            alpha = min(alpha, across.alpha)
        beta = min((line.beta for k, line in lines.items() if k > 0), default=0.0)
        return Line(alpha, beta, 1.0, 0.0, RIDGE, (UNMEASURED_REL_SD * alpha) ** 2)

    def seed(self, k: int, requests: float, steps: float, drafted: float, seconds: float) -> None:
        """Stored totals (a warm start) as ``requests`` requests at their mean."""
        if steps <= 0 or seconds <= 0 or requests <= 0:
            return
        self._lines.clear()
        sums = self._sums.setdefault(k, DecayingSums(self.halflife))
        sums.seed(self._clock, requests, requests * seconds / steps, requests * drafted / steps)

    def doubt(self, weight: float) -> None:
        """Let each line weigh at most ``weight`` requests (the same means, wider errors): after a model
        version change the new pair's first requests outweigh what was measured before at once."""
        self._lines.clear()
        for sums in self._sums.values():
            have = sums.weight(self._clock)
            if have > weight:
                sums.scale(self._clock, weight / have)
