"""Model-based choice among the pools a proxy routes to: acceptance shared by a domain's pools, step cost
shared by every domain.

A pool of lookahead K gives, per step, Leviathan et al.'s (1 - a^(K+1)) / (1 - a) tokens at per-token
acceptance a (arXiv 2211.17192) and costs seconds per step that depend on the pool, not the domain. So one
domain's requests on any speculating pool tell how its draft does on every pool, and every domain's
requests tell what a pool's step costs: the predicted goodput of each pool in each domain is measured by
all traffic, not only by that pool's requests in that domain, and far fewer probes tell pools apart that
are within 5-15% of each other while one request's goodput is as noisy as that.

Acceptance is backed out of the accepted tokens with the expected accepted length at each K (pooling
accepted / drafted over pools would read a lower acceptance off a longer K, whose later positions are
reached less often). Both estimates are discounted: acceptance over the domain's requests, so a target
update that leaves the draft stale is followed within a few requests; cost over all requests, slower.
A pool's own measured tokens per step in a domain overrides the model as it accrues (shrinkage), so an
acceptance that is not constant over positions does not mislead for long. The policy picks the largest
upper bound: the prediction made optimistic by the acceptance's and the cost's standard errors, so a pool
is probed only while its prediction is uncertain enough to beat the best one's.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from policies.arms import restricted
from policies.base import ArmStats, Decision, Outcome, Policy
from policies.estimates import DecayingSums, shrink
from policies.goodput import backed_out_acceptance, goodput, leviathan_tokens


def pool_goodput(accept: float, k: int, seconds_per_step: float, tokens: float = 0.0, steps: float = 0.0,
                 prior_steps: float = 32.0) -> float:
    """Predicted tokens per second of a pool of lookahead ``k``: tokens per step over ``seconds_per_step``.

    Tokens per step: Leviathan's (1 - a^(k+1)) / (1 - a) at acceptance ``accept`` (1 for k = 0), shrunk
    toward the ``tokens`` over ``steps`` this domain measured on the pool by ``prior_steps`` pseudo-steps
    (``shrink``).
    """
    model = leviathan_tokens(accept, k) if k > 0 else 1.0
    return goodput(shrink([tokens], [steps], [model], prior_steps)[0], seconds_per_step)


KEEP_AFTER_CHANGE = 0.1  # share of a domain's acceptance evidence kept after a jump or a version change


class _Counts:
    """Per-lookahead discounted steps, accepted and drafted tokens and requests of a domain (or of all), and
    the requests since the last speculative one (``idle``: how long acceptance went unmeasured)."""

    __slots__ = ("steps", "accepted", "drafted", "requests", "idle")

    def __init__(self, narms: int):
        self.steps, self.accepted = [0.0] * narms, [0.0] * narms
        self.drafted, self.requests = [0.0] * narms, [0.0] * narms
        self.idle = 0

    def add(self, gamma: float, k: int, steps: float, accepted: float, drafted: float, requests: float = 1.0) -> None:
        for sums in (self.steps, self.accepted, self.drafted, self.requests):
            for i, v in enumerate(sums):
                sums[i] = v * gamma
        self.steps[k] += steps
        self.accepted[k] += accepted
        self.drafted[k] += drafted
        self.requests[k] += requests
        self.idle = 0


class PoolModel(Policy):
    """Per domain, the pool of highest predicted goodput from a shared acceptance and shared step costs.

    Parameters
    ----------
    halflife
        The domain's speculative requests after which its acceptance evidence weighs half.
    cost_halflife
        Requests (of all domains) after which a step-cost measurement weighs half.
    prior_steps
        Pseudo-steps of the model's tokens per step against a pool's own measurement in the domain.
    z
        Width of the optimism, in standard errors.
    spread
        Standard deviation of acceptance between requests (prompts differ), beyond the per-token binomial
        error: it keeps a few requests from looking more certain than they are.
    drift
        How far acceptance may wander per request of the domain while no pool measures it (a random walk):
        a domain served by ``off`` grows uncertain and re-probes a draft, soon where it nearly paid, rarely
        where it lost by far.
    jump
        A request whose acceptance lies more than this many standard deviations from the domain's is a
        change (a target update, a new draft): the older evidence is dropped to a tenth at once.
    min_requests
        Requests a pool's cost needs (from any domain) before it is predicted rather than tried.
    """

    name = "pool-model"
    per_request = True  # learns from one aggregate outcome per request

    def __init__(self, kmax: int = 8, halflife: float = 8.0, cost_halflife: float = 200.0,
                 prior_steps: float = 32.0, z: float = 0.5, spread: float = 0.05, drift: float = 0.02,
                 jump: float = 3.0, min_requests: int = 2,
                 seed: int | None = None):
        super().__init__(kmax, seed)
        for label, value in (("halflife", halflife), ("cost_halflife", cost_halflife),
                             ("prior_steps", prior_steps)):
            if not 0.0 < value < math.inf:
                raise ValueError(f"{label} must be a positive number, got {value!r}")
        for label, value in (("z", z), ("spread", spread), ("drift", drift), ("jump", jump)):
            if not 0.0 <= value < math.inf:
                raise ValueError(f"{label} must be a non-negative number, got {value!r}")
        if type(min_requests) is not int or min_requests < 1:
            raise ValueError(f"min_requests must be a positive integer, got {min_requests!r}")
        self.halflife, self.cost_halflife, self.prior_steps = halflife, cost_halflife, prior_steps
        self.z, self.spread, self.drift, self.jump, self.min_requests = z, spread, drift, jump, min_requests
        self.arms: tuple[int, ...] = tuple(range(kmax + 1))
        self._gamma = math.exp2(-1.0 / halflife)
        self._clear()

    def _clear(self) -> None:
        self._requests = 0  # of all domains: the cost sums' clock
        self._costs = [DecayingSums(self.cost_halflife) for _ in range(self.kmax + 1)]  # seconds / steps
        self._all = _Counts(self.kmax + 1)  # every domain: a new domain's prior
        self._domains: dict[str, _Counts] = {}

    def restrict(self, arms: Iterable[int]) -> "PoolModel":
        """Choose only among ``arms`` (the lookaheads of the pools that are up) from now on."""
        self.arms = restricted(arms, self.kmax)
        return self

    def acceptance(self, domain: str) -> tuple[float, float]:
        """``(a, standard error)`` of the domain's per-token acceptance; every domain's evidence counts as
        one request's worth, so a new domain starts from the others' (and from 0.5 with none)."""
        own = self._domains.get(domain) or _Counts(self.kmax + 1)
        every = self._all
        scale = 1.0 / max(sum(every.requests[1:]), 1.0)
        steps = [s + scale * t for s, t in zip(own.steps, every.steps)]
        accepted = [s + scale * t for s, t in zip(own.accepted, every.accepted)]
        drafted = [s + scale * t for s, t in zip(own.drafted, every.drafted)]
        ks = [d / s if s > 0 else 0.0 for s, d in zip(steps, drafted)]
        a = backed_out_acceptance(steps, accepted, ks)
        requests = sum(own.requests[1:]) + min(sum(every.requests[1:]), 1.0)
        if a is None or requests <= 0:
            return 0.5, math.inf
        reached = sum(accepted) + sum(steps[1:])  # positions judged: accepted ones plus about a rejection a step
        var = a * (1.0 - a) / max(reached, 1.0) + self.spread ** 2 / requests + self.drift ** 2 * own.idle
        return a, math.sqrt(var)

    def cost(self, k: int) -> tuple[float, float]:
        """``(seconds per step, relative standard error)`` of the pool of lookahead ``k`` (inf: unmeasured)."""
        sums = self._costs[k]
        if sums.weight(self._requests) < self.min_requests - 0.5:  # discounted: two requests weigh just under 2
            return 0.0, math.inf
        mean = sums.ratio(self._requests)
        return mean, sums.stderr(self._requests) / mean if mean > 0 else math.inf

    def choose(self, domain: str) -> Decision:
        arms = self.arms
        if len(arms) == 1:
            return self.decision(arms[0], f"pool-model: only K={arms[0]} is available")
        costs = [self.cost(k) for k in arms]
        untried = [k for k, (_, rel) in zip(arms, costs) if rel == math.inf]
        if untried:
            k = self._rng.choice(untried)
            return self.decision(k, f"pool-model: the cost of K={k} is not measured yet")
        a, se = self.acceptance(domain)
        a_high = min(1.0, a + self.z * se)
        own = self._domains.get(domain)
        best = (-math.inf, arms[0], 0.0)
        for k, (seconds, rel) in zip(arms, costs):
            tokens = steps = 0.0
            if own is not None:
                steps = own.steps[k]
                tokens = steps + own.accepted[k]  # each step emits its accepted tokens and one more
            low = seconds / (1.0 + self.z * rel)
            bound = pool_goodput(a_high, k, low, tokens, steps, self.prior_steps)
            if bound > best[0]:  # the smaller K on ties
                best = (bound, k, pool_goodput(a, k, seconds, tokens, steps, self.prior_steps))
        bound, k, mean = best
        return self.decision(k, f"pool-model: K={k} predicts {mean:.0f} tok/s (bound {bound:.0f}; "
                                f"acceptance {a:.2f} +- {se:.2f})")

    def update(self, domain: str, outcome: Outcome) -> "PoolModel":
        """Learn from one request (or step); untimed ones and lookaheads outside 0..kmax carry nothing."""
        k, seconds, steps = outcome.lookahead, outcome.seconds, outcome.steps
        if not (0 <= k <= self.kmax and seconds > 0 and steps > 0):
            return self
        self._requests += 1
        self._costs[k].add(self._requests, seconds, float(steps))
        counts = self._domains.get(domain)
        if counts is None:
            counts = self._domains[domain] = _Counts(self.kmax + 1)
        drafted = float(min(outcome.drafted, k * steps))
        if k == 0 or drafted <= 0:
            counts.idle += 1
            return self
        accepted = float(min(outcome.accepted, drafted))
        if sum(counts.requests) > 0 and self._jumped(counts, steps, accepted, drafted):
            counts.add(KEEP_AFTER_CHANGE, k, 0.0, 0.0, 0.0, 0.0)
        counts.add(self._gamma, k, steps, accepted, drafted)
        self._all.add(self._gamma, k, steps, accepted, drafted)
        return self

    def _jumped(self, counts: _Counts, steps: float, accepted: float, drafted: float) -> bool:
        """Whether one request's acceptance is a change rather than noise (``jump`` standard deviations)."""
        ks = [d / s if s > 0 else 0.0 for s, d in zip(counts.steps, counts.drafted)]
        a = backed_out_acceptance(counts.steps, counts.accepted, ks)
        mine = backed_out_acceptance([steps], [accepted], [drafted / steps])
        if a is None or mine is None:
            return False
        sd = math.sqrt(self.spread ** 2 + a * (1.0 - a) / (accepted + steps))
        return abs(mine - a) > self.jump * sd

    def warm_start(self, domain: str, history: Sequence[ArmStats]) -> "PoolModel":
        """Start from stored totals: each lookahead as at most a memory's worth of requests of the domain
        (a stored step drafted its full K), and its cost as at most ``min_requests`` requests."""
        counts = self._domains[domain] = _Counts(self.kmax + 1)
        memory = 1.0 / (1.0 - self._gamma)
        for h in history:
            k = h.lookahead
            if not 0 <= k <= self.kmax or h.steps <= 0:
                continue
            f = min(1.0, memory * self.prior_steps / h.steps)
            accepted = max(0.0, min(float(h.emitted - h.steps), float(k * h.steps)))
            counts.add(1.0, k, f * h.steps, f * accepted, f * k * h.steps, f * h.steps / self.prior_steps)
            seconds = h.draft_seconds + h.verify_seconds
            if seconds > 0:
                self._costs[k].seed(self._requests, float(self.min_requests), seconds, float(h.steps))
        return self

    def reconsider(self) -> "PoolModel":
        """A model version changed: what was measured describes the old pair. Acceptance evidence keeps a
        tenth of its weight (as after a ``jump``) and each pool's step cost at most ``min_requests`` requests'
        worth, so the new pair's first requests outweigh both at once while the domains go on being served
        from what was known. (Forgetting everything made every pool an untried one again: each took
        ``min_requests`` requests before it was predicted, 2-3 of a stale domain's first 24 requests on
        draft pools at half speed in bench/engine_llamacpp.py.)"""
        for counts in (*self._domains.values(), self._all):
            idle = counts.idle
            counts.add(KEEP_AFTER_CHANGE, 0, 0.0, 0.0, 0.0, 0.0)
            counts.idle = idle
        for sums in self._costs:
            weight = sums.weight(self._requests)
            if weight > self.min_requests:
                sums.scale(self._requests, self.min_requests / weight)
        return self

    def forget(self, domain: str) -> "PoolModel":
        self._domains.pop(domain, None)
        return self

    def __repr__(self) -> str:
        return (f"PoolModel(kmax={self.kmax}, halflife={self.halflife}, cost_halflife={self.cost_halflife}, "
                f"z={self.z}, seed={self.seed})")
