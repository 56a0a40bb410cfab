"""Sliding-window UCB over lookaheads K = 0..kmax (Garivier & Moulines, arXiv 0805.3415).

Only the domain's last ``window`` steps count, so a world that changed (stale draft, new load) is
forgotten after at most one window, and an arm that left the window is tried again. Each arm's estimate
is the ratio of sums (tokens over seconds) of its steps in the window.

The paper's bonus B sqrt(xi log(min(t, window)) / n) needs the reward range B; goodput has none (200
tok/s on one pod, 20k on another), so B is replaced by the pooled within-arm standard deviation of
per-step goodput in the window, which makes the index scale-free.
"""

from __future__ import annotations

import math
import random
from collections import deque
from typing import Sequence

from policies.base import ArmStats, Decision, Outcome, Policy

# Stored totals carry no spread; warm-start steps alternate around the mean with this coefficient of
# variation (typical of speculative steps, whose emitted count is a truncated geometric).
_WARM_CV = 0.5


def ucb_indices(n: Sequence[int], e: Sequence[float], s: Sequence[float], g: Sequence[float],
                gg: Sequence[float], horizon: int, c: float) -> list[float]:
    """Upper confidence bounds e/s + c * sigma * sqrt(log(horizon) / n) of arms that all have n >= 1.

    Per arm: ``n`` steps, sums of emitted ``e`` and seconds ``s``, sums of per-step goodput ``g`` and of
    its square ``gg``. sigma is the pooled within-arm standard deviation of per-step goodput (0 when no
    arm has two steps): between-arm differences are what is being estimated, not noise.
    """
    ssq, dof = 0.0, 0
    for nk, gk, ggk in zip(n, g, gg):
        ssq += ggk - gk * gk / nk
        dof += nk - 1
    sigma = math.sqrt(ssq / dof) if dof > 0 and ssq > 0 else 0.0
    width = c * sigma * math.sqrt(math.log(horizon)) if horizon > 1 else 0.0
    return [ek / sk + width / math.sqrt(nk) for nk, ek, sk in zip(n, e, s)]


class _Window:
    """The domain's last steps and per-arm running sums over them (O(1) per step)."""

    __slots__ = ("steps", "t", "since_rebuild", "n", "e", "s", "g", "gg", "rng")

    def __init__(self, narms: int, rng: random.Random):
        self.steps: deque[tuple[int, float, float]] = deque()
        self.t = 0
        self.since_rebuild = 0
        self.rng = rng
        self._zero(narms)

    def _zero(self, narms: int) -> None:
        self.n = [0] * narms
        self.e = [0.0] * narms
        self.s = [0.0] * narms
        self.g = [0.0] * narms
        self.gg = [0.0] * narms

    def _add(self, k: int, e: float, s: float, sign: float) -> None:
        g = e / s
        self.n[k] += int(sign)
        self.e[k] += sign * e
        self.s[k] += sign * s
        self.g[k] += sign * g
        self.gg[k] += sign * g * g

    def push(self, k: int, e: float, s: float, window: int) -> None:
        self.steps.append((k, e, s))
        self.t += 1
        self._add(k, e, s, 1.0)
        if len(self.steps) > window:
            self._add(*self.steps.popleft(), -1.0)
            self.since_rebuild += 1
            # Subtracting floats for ever lets rounding error creep into the sums; recompute now and then.
            if self.since_rebuild >= 16 * window:
                self.since_rebuild = 0
                self._zero(len(self.n))
                for step in self.steps:
                    self._add(*step, 1.0)


class SlidingWindowUCB(Policy):
    """Sliding-window UCB of the lookahead, per domain.

    Parameters
    ----------
    kmax
        Largest lookahead; arms are 0..kmax (0: no speculation).
    window
        Steps of the domain that count. Every arm is tried at least once per window (the price of
        forgetting: (kmax + 1) / window of the steps when one arm is clearly best); after a change the
        policy follows within about a window. 500: under 2 % forced trials at kmax 8.
    c
        Width of the confidence bonus, in pooled standard deviations of per-step goodput. The window's
        forced trials already keep every arm in view, so a narrow bonus (0.5) wastes fewer steps than
        the paper's range-based one; on simulated worlds regret was about half of that at c = 1.
    warm_cap
        Largest number of steps one arm's history counts as in ``warm_start``; None: window // (kmax + 1),
        so that history fills at most one window and is gone once a window of fresh steps has arrived.
    seed
        Seeds the per-domain random streams (derived from the seed and the domain label).
    """

    name = "sliding-ucb"

    def __init__(self, kmax: int = 8, window: int = 500, c: float = 0.5, warm_cap: int | None = None,
                 seed: int | None = None):
        super().__init__(kmax, seed)
        if type(window) is not int or window < 2 * (kmax + 1):
            raise ValueError(f"window must be an integer >= 2 * (kmax + 1) = {2 * (kmax + 1)}, "
                             f"got {window!r}")
        if not 0.0 <= c < math.inf:
            raise ValueError(f"c must be a non-negative number, got {c!r}")
        if warm_cap is not None and (type(warm_cap) is not int or warm_cap < 1):
            raise ValueError(f"warm_cap must be a positive integer or None, got {warm_cap!r}")
        self.window = window
        self.c = c
        self.warm_cap = warm_cap
        self._domains: dict[str, _Window] = {}

    def _new(self, domain: str) -> _Window:
        # A stream per domain, so one domain's choices do not depend on other domains' traffic.
        seed = self._rng.getrandbits(64) if self.seed is None else f"{self.seed}\x00{domain}"
        state = self._domains[domain] = _Window(self.kmax + 1, random.Random(seed))
        return state

    def choose(self, domain: str) -> Decision:
        w = self._domains.get(domain) or self._new(domain)
        if min(w.n) <= 0:
            untried = [k for k, n in enumerate(w.n) if n <= 0]
            k = w.rng.choice(untried)
            return self.decision(k, f"sliding-ucb: K={k} not tried in the last {self.window} steps")
        bounds = ucb_indices(w.n, w.e, w.s, w.g, w.gg, min(w.t, self.window), self.c)
        best_u = max(bounds)
        best_k = bounds.index(best_u)  # the smaller K on ties
        mean = w.e[best_k] / w.s[best_k]
        return self.decision(best_k, f"sliding-ucb: K={best_k} bound {best_u:.0f} tok/s "
                                     f"(mean {mean:.0f}, n={w.n[best_k]} of last {len(w.steps)})")

    def update(self, domain: str, outcome: Outcome) -> "SlidingWindowUCB":
        """Learn from one step (or one aggregate of steps: one observation of its tokens and time). Steps
        outside 0..kmax, or without measured time, carry no goodput here."""
        k, seconds = outcome.lookahead, outcome.seconds
        if 0 <= k <= self.kmax and seconds > 0:
            w = self._domains.get(domain) or self._new(domain)
            w.push(k, float(outcome.emitted), seconds, self.window)
        return self

    def warm_start(self, domain: str, history: Sequence[ArmStats]) -> "SlidingWindowUCB":
        """Replace ``domain``'s window by stored totals, as up to ``warm_cap`` mean steps per arm.

        The synthetic steps are interleaved across arms so that they leave the window together.
        """
        w = self._new(domain)
        cap = self.warm_cap if self.warm_cap is not None else self.window // (self.kmax + 1)
        runs = []
        for h in history:
            seconds = h.draft_seconds + h.verify_seconds
            if 0 <= h.lookahead <= self.kmax and h.steps > 0 and seconds > 0:
                runs.append((h.lookahead, min(h.steps, cap), h.emitted / h.steps, seconds / h.steps))
        for i in range(max((m for _, m, _, _ in runs), default=0)):
            for k, m, me, ms in runs:
                if i < m:
                    # Alternate above and below the mean (an odd last step sits on it): sums keep the mean.
                    dev = 0.0 if i == m - 1 and m % 2 else _WARM_CV * (-1) ** i
                    w.push(k, me * (1.0 + dev), ms, self.window)
        w.t = 0  # history does not count toward the horizon of fresh steps
        return self

    def forget(self, domain: str) -> "SlidingWindowUCB":
        self._domains.pop(domain, None)  # a fit in flight checks its state is still the domain's
        return self

    def __repr__(self) -> str:
        return (f"SlidingWindowUCB(kmax={self.kmax}, window={self.window}, c={self.c}, "
                f"warm_cap={self.warm_cap}, seed={self.seed})")
