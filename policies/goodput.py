"""Goodput arithmetic as pure functions: what a lookahead K is expected to give and cost.

Goodput is tokens emitted per second of step time. A step with lookahead K drafts K tokens, verifies them
in one target pass and emits accepted + 1 tokens. With conditional acceptance ``cond[i]`` at drafted
position i + 1 (probability of acceptance there given every earlier drafted token was accepted):

    E[emitted | K] = 1 + sum_{j=1..K} prod_{i<j} cond[i]

which is Leviathan et al.'s (1 - a^(K+1)) / (1 - a) when every cond[i] = a (arXiv 2211.17192).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence


def goodput(emitted: float, seconds: float) -> float:
    """Tokens per second; 0 when no time was measured."""
    return emitted / seconds if seconds > 0 else 0.0


def expected_emitted(cond: Sequence[float], k: int) -> float:
    """Expected tokens emitted by one step of lookahead ``k`` (positions past ``cond`` count as 0)."""
    total, reach = 1.0, 1.0
    for i in range(min(k, len(cond))):
        reach *= min(max(cond[i], 0.0), 1.0)
        total += reach
    return total


def leviathan_tokens(a: float, k: int) -> float:
    """(1 - a^(K+1)) / (1 - a): expected tokens per step at a constant acceptance ``a``."""
    return float(k + 1) if a >= 1.0 else (1.0 - a ** (k + 1)) / (1.0 - a)


def implied_lengths(k: int, mean_accepted: float) -> list[float]:
    """Shares of steps of lookahead ``k`` that accept 0..k tokens when a constant per-token acceptance a
    gives ``mean_accepted`` accepted tokens per step (sum_{i=1..k} a^i, solved for a by
    ``backed_out_acceptance``):
    a^j (1 - a) for j < k, a^k for j = k. What an aggregate of steps, whose positions are unknown, implies
    for the per-position counts under the model Leviathan's formula assumes."""
    if k <= 0 or mean_accepted <= 0:
        return [1.0] + [0.0] * max(k, 0)
    if mean_accepted >= k:
        return [0.0] * k + [1.0]
    a = backed_out_acceptance([1.0], [mean_accepted], [k])
    return [a ** j * (1.0 - a) for j in range(k)] + [a ** k]


def capped_goodput(accepted: float, drafted: float, alpha: float, beta: float) -> float:
    """Tokens per second of a pool whose steps accept ``accepted`` and draft ``drafted`` tokens on average
    and cost ``alpha + beta * drafted`` seconds (policies/pool_cost.py): (1 + accepted) / that. It needs no
    acceptance model: a pool named kN drafts anywhere from 0 to N a step (n-gram self-speculation, a draft
    stopped early), so both are measured per step rather than derived from N. 0 without a cost."""
    return goodput(1.0 + accepted, alpha + beta * drafted)


def leviathan_speedup(a: float, k: int, c: float) -> float:
    """Leviathan et al.'s wall-time speed-up with draft/target cost ratio ``c`` (verify = one target step)."""
    return leviathan_tokens(a, k) / (k * c + 1.0)


def step_seconds(k: int, draft_per_token: float, verify: Sequence[float]) -> float:
    """Seconds of one step of lookahead ``k``: k draft forwards plus the verify pass of k + 1 tokens."""
    return k * draft_per_token + verify[min(k, len(verify) - 1)]


@dataclass(frozen=True)
class StepCost:
    """Seconds (or any one unit) of one step: per drafted token, and the verify pass per K (index = K; the
    last entry serves larger K)."""

    draft_per_token: float
    verify: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.verify or any(not (v > 0 and math.isfinite(v)) for v in self.verify):
            raise ValueError(f"verify must hold at least one finite time > 0, got {self.verify!r}")
        if not (self.draft_per_token >= 0 and math.isfinite(self.draft_per_token)):
            raise ValueError(f"draft_per_token must be a finite number >= 0, got {self.draft_per_token!r}")

    @classmethod
    def from_ratio(cls, c: float) -> "StepCost":
        """Leviathan's model: a drafted token costs c target steps, a verify pass costs one."""
        return cls(c, (1.0,))

    @property
    def ratio(self) -> float:
        """c: a drafted token's cost over a plain target step."""
        return self.draft_per_token / self.verify[0]

    def step_seconds(self, k: int) -> float:
        return step_seconds(k, self.draft_per_token, self.verify)

    def verify_ratio(self, k: int) -> float:
        """The verify pass of K + 1 tokens over a plain target step (1 in Leviathan's model)."""
        return self.verify[min(k, len(self.verify) - 1)] / self.verify[0]


def predicted_goodput(cond: Sequence[float], k: int, draft_per_token: float, verify: Sequence[float]) -> float:
    """Expected tokens per second of lookahead ``k`` (ratio of expectations: tokens over time)."""
    return goodput(expected_emitted(cond, k), step_seconds(k, draft_per_token, verify))


def best_lookahead(cond: Sequence[float], draft_per_token: float, verify: Sequence[float], kmax: int) -> int:
    """The K in 0..kmax with the highest predicted goodput (the smaller K on ties)."""
    return argmax_goodput(goodput_table(cond, draft_per_token, verify, kmax)[2])


def argmax_goodput(scores: Sequence[float]) -> int:
    """The index of the highest score, the smaller one on ties (within 1e-12 relative)."""
    best = max(scores)
    return next(k for k, s in enumerate(scores) if s >= best * (1 - 1e-12))


def goodput_table(cond: Sequence[float], draft_per_token: float, verify: Sequence[float],
                  kmax: int) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """Per K in 0..kmax: ``expected_emitted``, ``step_seconds`` and ``predicted_goodput`` in one pass
    (the same arithmetic, in the same order, as those functions one K at a time)."""
    emitted, seconds, scores = [], [], []
    total, reach, n, last = 1.0, 1.0, len(cond), len(verify) - 1
    for k in range(kmax + 1):
        if 0 < k <= n:
            reach *= min(max(cond[k - 1], 0.0), 1.0)
            total += reach
        s = k * draft_per_token + verify[min(k, last)]
        emitted.append(total)
        seconds.append(s)
        scores.append(goodput(total, s))
    return tuple(emitted), tuple(seconds), tuple(scores)


def break_even_acceptance(k: int, c: float, verify_ratio: float = 1.0) -> float:
    """The constant acceptance at which lookahead ``k`` runs as fast as plain decoding.

    ``verify_ratio`` is the cost of verifying k + 1 tokens over one target step. Found by bisection on
    leviathan_tokens(a, k) = k c + verify_ratio; returns 1.0 when no acceptance breaks even.
    """
    need = k * c + verify_ratio
    if k == 0 or need >= k + 1:
        return 1.0 if k else 0.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if leviathan_tokens(mid, k) < need else (lo, mid)
    return hi if math.isfinite(hi) else 1.0


def stop_weight(accept: float, seconds_per_token: float, draft_per_token: float) -> float:
    """The weight w of the miss rate in the early-stop rule "minimise fpr + w fnr" (transformers uses 3).

    Stopping after a token that is then accepted loses the next drafted position: about ``accept`` tokens,
    each worth ``seconds_per_token`` (1 / goodput), less the draft forward saved. Drafting on after a token
    that is then rejected wastes at least one draft forward. fpr and fnr are rates per class, so that cost
    ratio is scaled by the class ratio accept / (1 - accept). 0 means stopping is always right.
    """
    if draft_per_token <= 0:
        return math.inf
    gain = max(accept * seconds_per_token - draft_per_token, 0.0) / draft_per_token
    return gain * accept / max(1.0 - accept, 1e-9)


def marginal_seconds(seconds: Sequence[float]) -> float:
    """Seconds one more drafted token adds to a step: the least-squares slope of step seconds (index = K)
    over K = 1..kmax, at least 0. K = 0 is left out: the first drafted token also pays for starting the
    draft and widening the verify pass, and an early stop only ever decides about the second and later."""
    ks = range(1, len(seconds))
    if len(ks) < 2:
        return 0.0
    mean_k = sum(ks) / len(ks)
    mean_s = sum(seconds[k] for k in ks) / len(ks)
    slope = sum((k - mean_k) * (seconds[k] - mean_s) for k in ks) / sum((k - mean_k) ** 2 for k in ks)
    return max(slope, 0.0)


def stop_limits(next_accept: Sequence[float], marginal: float, rate: float) -> list[float]:
    """Per drafted position j, the probability that all j drafted tokens are accepted below which drafting
    should stop (SpecDec++'s threshold on the chance of a rejection ahead, arXiv 2405.19715).

    Drafting token j + 1 adds one emitted token exactly when all of 1..j + 1 are accepted, probability
    P_all(j) * ``next_accept[j]``, and costs ``marginal`` seconds, worth ``marginal * rate`` tokens at the
    current goodput ``rate`` (maximising gain - rate * seconds maximises goodput at the optimum, Dinkelbach).
    Stop when the gain falls short: P_all(j) < marginal * rate / next_accept[j]. While the gain
    P_all(j) * next_accept[j] only falls with j (P_all never rises) and costs are linear in K, this
    one-step look-ahead rule is the optimal stop (the monotone case of optimal stopping).
    ``next_accept[j]``: acceptance at drafted position j + 1 given all earlier ones accepted. inf: always
    stop (that position is never accepted).
    """
    cost = max(marginal, 0.0) * max(rate, 0.0)
    return [cost / a if a > 0 else math.inf for a in next_accept]


def backed_out_acceptance(steps: Sequence[float], accepted: Sequence[float],
                          lookaheads: Sequence[float]) -> float | None:
    """The constant per-token acceptance a with sum_K steps_K L(a, K) = sum_K accepted_K, where
    L(a, K) = a (1 - a^K) / (1 - a) is the expected accepted tokens of a step of lookahead K (a method-of-
    moments estimate over every pool at once). Lookaheads may be fractional (a request's mean drafted per
    step). ``None`` when nothing was drafted."""
    pairs = [(s, k) for s, k in zip(steps, lookaheads) if s > 0 and k > 0]
    ceiling = sum(s * k for s, k in pairs)
    if ceiling <= 0:
        return None
    total = sum(accepted)
    if total <= 0:
        return 0.0
    if total >= ceiling:
        return 1.0
    # The left side rises with a. Newton's method kept inside a shrinking bracket (a bisection step where
    # Newton would leave it): 3-6 evaluations where bisection to the same 1e-12 took 40, on the proxy's
    # request path. Start: total / ceiling, a lower bound (a + ... + a^K <= K a).
    low, high = 0.0, 1.0
    a = total / ceiling
    for _ in range(100):
        value = slope = 0.0
        for s, k in pairs:
            value += s * (leviathan_tokens(a, k) - 1.0)
            slope += s * _slope(a, k)
        excess = value - total
        if excess < 0:
            low = a
        else:
            high = a
        step = a - excess / slope if slope > 0 else -1.0
        nxt = step if low < step < high else 0.5 * (low + high)
        if abs(nxt - a) <= 1e-12 or high - low <= 1e-12:
            return nxt
        a = nxt
    return a


def _slope(a: float, k: float) -> float:
    """d/da of (1 - a^(k+1)) / (1 - a): sum_{i=1..k} i a^(i-1) for whole k, in closed form for any k."""
    if a >= 1.0 - 1e-6:  # the closed form cancels near 1; its limit there is k (k + 1) / 2
        return k * (k + 1) / 2.0
    return (1.0 - (k + 1) * a ** k + k * a ** (k + 1)) / (1.0 - a) ** 2
