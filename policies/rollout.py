"""Rollout verdicts: what a new target will do to speculation in a domain, decided before it ships.

Inputs are the draft's expected per-token acceptance against the new target (a), the same quantity measured
under the current target (history; may be missing), and the cost of a step. The speed-up of lookahead K is
goodput(K) / goodput(0) from policies/goodput.py with every drafted position accepted with probability a
(Leviathan et al., arXiv 2211.17192). Step cost: ``draft_per_token`` seconds per drafted token plus
``verify[K]`` seconds for the target pass over K + 1 tokens (the last entry serves larger K); in units of
one target step it is c per token and a verify of 1, Leviathan's model.

Verdicts, first match wins:
  off        no K in 1..kmax beats plain decoding by ``min_speedup`` (below break-even): turn speculation off
  redistill  still above break-even, but acceptance fell by more than ``max_drop`` from the history: the
             draft is stale; re-distill it against the new target first (serve at ``lookahead`` meanwhile)
  lower      the best K is below the K served now: lower K to ``lookahead``
  keep       keep speculating at the K served now
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from policies.fit import cost_trend
from policies.goodput import StepCost, break_even_acceptance, goodput_table

VERDICTS = ("keep", "lower", "off", "redistill")
ACTIONS = {"keep": "keep speculation", "lower": "lower K", "off": "turn off", "redistill": "re-distill first"}


@dataclass(frozen=True)
class RolloutConfig:
    kmax: int = 8
    min_speedup: float = 1.0  # predicted tokens/s ratio over plain decoding a K must beat (1.0: break-even)
    max_drop: float = 0.10  # acceptance drop from the history that calls for re-distilling

    def __post_init__(self) -> None:
        if type(self.kmax) is not int or not 1 <= self.kmax <= 64:
            raise ValueError(f"kmax must be an integer in 1..64, got {self.kmax!r}")
        if not (isinstance(self.min_speedup, (int, float)) and math.isfinite(self.min_speedup)
                and self.min_speedup > 0):
            raise ValueError(f"min_speedup must be a finite number > 0, got {self.min_speedup!r}")
        if not (isinstance(self.max_drop, (int, float)) and 0 <= self.max_drop <= 1):
            raise ValueError(f"max_drop must be a number in [0, 1], got {self.max_drop!r}")


@dataclass(frozen=True)
class Verdict:
    verdict: str  # one of VERDICTS
    lookahead: int  # the K to serve (0: off)
    speedup: float  # predicted tokens/s ratio over plain decoding at ``lookahead``
    best_lookahead: int  # the K of best predicted goodput in 0..kmax
    break_even: float  # the acceptance at which K = 1 runs as fast as plain decoding at this cost
    drop: float | None  # acceptance before minus after; None without history

    @property
    def action(self) -> str:
        return ACTIONS[self.verdict]

    @property
    def below_break_even(self) -> bool:
        return self.verdict == "off"


def speedups(acceptance: float, cost: StepCost, kmax: int) -> tuple[float, ...]:
    """Predicted tokens/s ratio over plain decoding for K = 0..kmax (the first is 1)."""
    scores = goodput_table([acceptance] * kmax, cost.draft_per_token, cost.verify, kmax)[2]
    return tuple(s / scores[0] for s in scores)


def judge(acceptance: float, cost: StepCost, current: int, before: float | None = None,
          config: RolloutConfig | None = None) -> Verdict:
    """The verdict for a domain served at lookahead ``current`` whose acceptance will be ``acceptance``
    (``before``: under the current target). See the module docstring."""
    config = config or RolloutConfig()
    ratios = speedups(acceptance, cost, config.kmax)
    best = max(range(1, config.kmax + 1), key=lambda k: (ratios[k], -k))
    drop = None if before is None else before - acceptance
    even = break_even_acceptance(1, cost.ratio, cost.verify[min(1, len(cost.verify) - 1)] / cost.verify[0])
    if ratios[best] <= config.min_speedup:
        return Verdict("off", 0, 1.0, 0, even, drop)
    if drop is not None and drop > config.max_drop:
        verdict = "redistill"
    elif 0 < best < current:
        verdict = "lower"
    else:
        verdict = "keep"
    k = best if verdict != "keep" or current < 1 else min(current, config.kmax)
    return Verdict(verdict, k, ratios[k], best, even, drop)


def fitted_verify(points: Sequence[tuple[int, float, int]], kmax: int) -> tuple[float, ...]:
    """Verify seconds per step for K = 0..kmax from measured (K, seconds per step, steps): the policies' own
    line in K (policies/fit.cost_trend: least squares weighted by steps, slope >= 0, one measured K flat,
    floored at half the cheapest measured mean)."""
    points = [(k, s, n) for k, s, n in points if n > 0 and s > 0]
    if not points:
        raise ValueError("no measured verify time")
    size = max(kmax, *(k for k, _, _ in points)) + 1
    weight, seconds = [0.0] * size, [0.0] * size
    for k, s, n in points:
        weight[k] += n
        seconds[k] += s * n
    return tuple(cost_trend(weight, seconds)[: kmax + 1])
