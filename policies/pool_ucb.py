"""Discounted UCB over a changing set of arms: the lookaheads of the upstream pools a proxy can route to.

An engine with its draft length fixed at start-up is steered by routing each domain's requests between pools
(``off``: K = 0, ``kN``: K = N); the arms are the pools' lookaheads, restricted at any time to the pools that
are up (``restrict``). Rewards are per-request goodput (tokens emitted per second of the request's engine
time). Estimates are exponentially discounted ratio-of-sums per arm (policies/arms.py), the discounted UCB
of Garivier & Moulines (arXiv 0805.3415): an arm not pulled for a while loses weight and its bonus grows
until it is tried again, so a stale draft's pool is left and a recovered one found.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from policies.arms import DiscountedArms, restricted
from policies.base import ArmStats, Decision, Outcome, Policy


def pool_index(goodput: float, count: float, rel_sd: float, total: float, c: float) -> float:
    """Upper bound goodput * (1 + c * rel_sd * sqrt(log(total) / count)) of one arm (inf when untried).

    ``rel_sd``: relative standard deviation of one request's goodput (scale-free: 200 tok/s on one pod,
    20k on another); ``count``: the arm's discounted requests; ``total``: all arms' discounted requests.
    """
    if count <= 0:
        return math.inf
    return goodput * (1.0 + c * rel_sd * math.sqrt(math.log(max(total, 2.0)) / count))


class PoolUCB(Policy):
    """Discounted UCB over the lookaheads of the available pools, per domain.

    Parameters
    ----------
    kmax
        Largest lookahead an arm may have.
    gamma
        Discount per request of the domain: about 1 / (1 - gamma) requests of memory (0.93: 14), so a
        domain whose draft went stale moves to a better pool within a few dozen requests.
    c
        Width of the bonus in relative standard deviations of per-request goodput.
    min_rel_sd
        Floor of the relative spread, so an arm measured once or twice (no spread yet) keeps a bonus.
    """

    name = "pool-ucb"
    per_request = True  # learns from one aggregate outcome per request

    def __init__(self, kmax: int = 8, gamma: float = 0.93, c: float = 1.0, min_rel_sd: float = 0.1,
                 seed: int | None = None):
        super().__init__(kmax, seed)
        if not 0.0 < gamma < 1.0:
            raise ValueError(f"gamma must be in (0, 1), got {gamma!r}")
        if not 0.0 <= c < math.inf:
            raise ValueError(f"c must be a non-negative number, got {c!r}")
        if not 0.0 <= min_rel_sd < math.inf:
            raise ValueError(f"min_rel_sd must be a non-negative number, got {min_rel_sd!r}")
        self.gamma, self.c, self.min_rel_sd = gamma, c, min_rel_sd
        self.arms: tuple[int, ...] = tuple(range(kmax + 1))
        self._domains: dict[str, DiscountedArms] = {}

    def restrict(self, arms: Iterable[int]) -> "PoolUCB":
        """Choose only among ``arms`` (the lookaheads of the pools that are up) from now on."""
        self.arms = restricted(arms, self.kmax)
        return self

    def _state(self, domain: str) -> DiscountedArms:
        state = self._domains.get(domain)
        if state is None:
            state = self._domains[domain] = DiscountedArms(self.kmax + 1, self.gamma)
        return state

    def choose(self, domain: str) -> Decision:
        arms = self.arms
        if len(arms) == 1:
            return self.decision(arms[0], f"pool-ucb: only K={arms[0]} is available")
        s = self._state(domain)
        counts = [s.count(k) for k in arms]
        untried = [k for k, n in zip(arms, counts) if n <= 1e-9]
        if untried:
            k = self._rng.choice(untried)
            return self.decision(k, f"pool-ucb: K={k} not measured yet")
        total = sum(counts)
        best_k, best_u = arms[0], -math.inf
        for k, n in zip(arms, counts):
            u = pool_index(s.goodput(k), n, self._rel_sd(s, k), total, self.c)
            if u > best_u:  # the smaller K on ties
                best_k, best_u = k, u
        return self.decision(best_k, f"pool-ucb: K={best_k} bound {best_u:.0f} tok/s "
                                     f"(mean {s.goodput(best_k):.0f}, {s.count(best_k):.1f} recent requests)")

    def _rel_sd(self, s: DiscountedArms, k: int) -> float:
        g, ms = s.goodput(k), s.mean_seconds(k)
        spread = math.sqrt(s.residual_var(k)) / (ms * g) if g > 0 and ms > 0 else 0.0
        return max(self.min_rel_sd, spread)

    def update(self, domain: str, outcome: Outcome) -> "PoolUCB":
        """Learn from one request (or step); untimed ones and lookaheads outside 0..kmax carry nothing."""
        k, seconds = outcome.lookahead, outcome.seconds  # a request's whole engine time
        if 0 <= k <= self.kmax and seconds > 0:
            self._state(domain).push(k, float(outcome.emitted), seconds)
        return self

    def warm_start(self, domain: str, history: Sequence[ArmStats]) -> "PoolUCB":
        """Start from stored totals, each arm counting as at most a memory's worth of requests."""
        s = self._domains[domain] = DiscountedArms(self.kmax + 1, self.gamma)
        cap = 1.0 / (1.0 - self.gamma)
        for h in history:
            if 0 <= h.lookahead <= self.kmax:
                s.add_totals(h.lookahead, h.steps, h.emitted, h.draft_seconds + h.verify_seconds, cap=cap)
        return self

    def reconsider(self) -> "PoolUCB":
        """A model version changed: every domain measures its arms afresh."""
        self._domains.clear()
        return self

    def __repr__(self) -> str:
        return f"PoolUCB(kmax={self.kmax}, gamma={self.gamma}, c={self.c}, seed={self.seed})"
