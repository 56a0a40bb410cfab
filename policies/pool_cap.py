"""Choice among the pools a proxy routes to when a pool's K is a cap on what each step drafts.

llama.cpp's n-gram self-speculation drafts anywhere from 0 to its cap a step (a draft model stopped early
at low confidence does too), so a pool named kN neither drafts N a step nor gets Leviathan's
(1 - a^(N+1)) / (1 - a) tokens for it. What the proxy records per request is measured instead, and split
by what it depends on:

- the pool's cost of a step as a line in what it drafted, seconds / step = alpha_p + beta_p x drafted /
  step, fitted over every domain's requests (policies/pool_cost.py): ``off`` is alpha_off, the same for
  every domain, measured once for all of them;
- the domain's accepted and drafted tokens per step on each pool (policies/pool_rates.py), predicted for a
  (domain, pool) not measured yet from the other pools and domains, so a new domain measured on one pool
  is not sent to every other pool to learn them.

The predicted goodput of pool p in domain d is (1 + accepted per step) / (alpha_p + beta_p x drafted per
step) (``capped_goodput``). The policy picks the largest upper bound: the accepted tokens made optimistic by
``z`` standard errors, the cost pessimistic by as many, so a pool is tried while it may beat the best one
and left once it is clearly slower. A domain with no evidence yet goes to the engine's default pool when
one is named (``prefer``: llama.cpp's --spec-default pool, say) instead of paying to explore. A pool no
request has measured yet is bounded by every drafted token accepted at the cheapest measured cost, and
tried once, in the domain whose requests run slowest from first byte of work to last (``_leaves_trying``):
``off`` is then never tried where speculation runs well above a plain step, and the others are predicted
everywhere from that one try. "Slowest" counts the prompt's evaluation (the records' ``prompt_seconds``):
a try costs a request its extra step time, and the share of the domain's speed that costs is smaller where
each request also evaluates a long prompt.

**Load.** A pool's cost per step depends on the load its requests meet (requests in flight on it,
specwatch_core/loads.py): under batching a step verifies every sequence's drafts in one pass, and a pass of 8 x 25
tokens is compute-bound where 1 x 25 is not (SmolLM2-135M F16 on 2 cores: ngram k24 1.26x off alone, 0.96x
at 8 in flight). So the cost lines are kept per (pool, load band); the domain's accepted and drafted tokens
per step are not (acceptance is the domain's and the pool's, whatever the load). ``choose_at`` scores each
pool at the band of the load the request would meet there. A band no request has met yet borrows the
nearest measured band's lines; once one request measured it, a pool not yet measured at that band gets the
band's optimistic prior and is tried once, in one domain, for all of them.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Collection, Iterable, Mapping, Sequence

from policies.arms import arm_of, restricted
from policies.base import ArmStats, Decision, Outcome, Policy
from policies.estimates import DecayingSums
from policies.goodput import capped_goodput
from specwatch_core.loads import band
from policies.pool_cost import PoolCosts
from policies.pool_rates import RateTable

WARM_REQUESTS = 2.0  # stored history of a (domain, pool) counts as this many requests: a start, not a certainty
WARM_STEPS = 64.0  # steps per warm request (the two-way fit weighs cells by steps)
THIN = 2.0  # requests of a domain, alone so far, before it tries pools no request has measured
EXPLORE_WINDOW = 64  # choices (of all domains) for which a domain's best known speed counts as current


class PoolCap(Policy):
    """Per domain, the pool of highest predicted goodput from shared step costs and per-domain rates.

    Parameters
    ----------
    halflife
        The domain's requests after which its evidence on a pool weighs half.
    cost_halflife
        Requests (of all domains) after which a cost measurement weighs half.
    z
        Width of the optimism, in standard errors.
    cell_spread
        How far a (domain, pool)'s rates may stray from the two-way model's, relative to 1 + the rate.
    domain_spread
        How far a new domain's level may stray from the typical domain's (before it is measured).
    jump
        A request whose accepted tokens per step lie more than this many spreads from its cell's is a change
        (a target update, a stale draft): the domain's evidence is cut to a tenth at once.
    split_margin
        How much faster a pool must be predicted before a request leaves the pools the load would keep it to
        (``_kept``): on a machine the pools share, those running now (a level split between two servers on
        one core ran 10-20% slower than either alone); on pools of their own, those with the fewest requests
        in flight (docs/load.md).
    """

    name = "pool-cap"
    per_request = True  # learns from one aggregate outcome per request
    load_aware = True  # costs per load band (choose_at)
    weighs_off = True  # K = 0 is one of its arms, measured once for all domains: the switch need not force it

    def __init__(self, kmax: int = 8, halflife: float = 32.0, cost_halflife: float = 200.0, z: float = 0.7,
                 cell_spread: float = 0.25, domain_spread: float = 0.5, jump: float = 4.0,
                 split_margin: float = 0.2, seed: int | None = None):
        super().__init__(kmax, seed)
        for label, value in (("halflife", halflife), ("cost_halflife", cost_halflife), ("jump", jump)):
            if not 0.0 < value < math.inf:
                raise ValueError(f"{label} must be a positive number, got {value!r}")
        for label, value in (("z", z), ("cell_spread", cell_spread), ("domain_spread", domain_spread),
                             ("split_margin", split_margin)):
            if not 0.0 <= value < math.inf:
                raise ValueError(f"{label} must be a non-negative number, got {value!r}")
        self.halflife, self.cost_halflife, self.z = halflife, cost_halflife, z
        self.cell_spread, self.domain_spread, self.jump = cell_spread, domain_spread, jump
        self.split_margin = split_margin
        self.arms: tuple[int, ...] = tuple(range(kmax + 1))
        self.default: int | None = None
        self._clear()

    def _clear(self) -> None:
        self._bands: dict[int, PoolCosts] = {}  # load band -> the pools' cost lines at that load
        self._rates = RateTable(self.halflife, self.cell_spread, self.domain_spread, self.jump)
        self._best: dict[str, tuple[float, int]] = {}  # domain -> (whole-request speed at its best, at choice)
        self._prompts: dict[str, DecayingSums] = {}  # domain -> prompt seconds per emitted token, per request
        self._chooses = self._updates = 0
        self._calls = 0  # choose_at calls
        self._seen: dict[str, deque[int]] = {}  # domain -> its last calls (the mix a burst is chosen for)

    def restrict(self, arms: Iterable[int]) -> "PoolCap":
        """Choose only among ``arms`` (the lookaheads of the pools that are up) from now on."""
        self.arms = restricted(arms, self.kmax)
        return self

    def prefer(self, arm: int | str | None) -> "PoolCap":
        """Send a domain without evidence to ``arm`` (a K, or a pool name ``off`` / ``kN``; None: no default)."""
        self.default = None if arm is None else arm_of(arm, self.kmax)
        return self

    def costs(self, b: int = 0) -> PoolCosts | None:
        """The cost lines at load band ``b``: its own once a request measured it, else the nearest measured
        band's (the lower on a tie); None while nothing is measured."""
        found = self._bands.get(b)
        if found is None and self._bands:
            found = self._bands[min(self._bands, key=lambda other: (abs(other - b), other))]
        return found

    def predicted(self, domain: str, k: int, b: int = 0) -> tuple[float | None, float] | None:
        """``(goodput, upper bound)`` of pool ``k`` in ``domain``, tokens per second. A pool no request has
        measured has no goodput yet, and the bound of every drafted token accepted at the cheapest measured
        cost (``PoolCosts.prior``): it is tried where it may beat the best, never where even that is slower
        (``off`` in a domain whose draft pools run twice as fast, k4 where k24 accepts 7 tokens a step).
        ``b``: the load band the request would meet on that pool. None while nothing at all is measured."""
        costs = self.costs(b)
        if costs is None:
            return None
        line = costs.line(k)
        rates = self._rates.predict(domain, k) if k > 0 and line is not None else None
        if line is None or (k > 0 and rates is None):
            line = costs.prior()
            if line is None:
                return None
            seconds = line.seconds(k)
            return None, (1.0 + k) / max(seconds - self.z * line.stderr(k), 0.5 * seconds)
        accepted = drafted = accepted_se = 0.0
        if rates is not None:
            accepted, accepted_se, drafted = rates.accepted, rates.accepted_se, rates.drafted
        seconds = line.seconds(drafted)
        low = max(seconds - self.z * line.stderr(drafted), 0.5 * seconds)
        return (capped_goodput(accepted, drafted, line.alpha, line.beta),
                (1.0 + accepted + self.z * accepted_se) / low)

    def choose(self, domain: str) -> Decision:
        return self.choose_at(domain, {})

    def choose_at(self, domain: str, loads: Mapping[int, int], busy: Collection[int] | None = None) -> Decision:
        """As ``choose``, each pool scored at the band of ``loads[k]`` (absent: a request alone). ``busy``:
        the pools running requests now when the pools share one machine (``--shared-load``; None when they
        do not): a pool that is not running is chosen over the best running one only when predicted
        ``split_margin`` faster, since two servers taking turns on one machine each batch fewer sequences (a
        level split between two servers on one core ran 10-20% slower than either alone, docs/load.md); a
        pool not measured at this load is not tried while another runs. Pools of their own keep the load
        even the same way: a pool with more in flight than another is chosen only when predicted
        ``split_margin`` faster (``_kept``). So the first request of a burst on
        an idle shared machine chooses for the burst: the pool of least time per token over the domains of
        the last ``EXPLORE_WINDOW`` choices, in their shares, each at its optimistic bound (a pool not
        measured at that load is tried for a burst then) (``_for_the_mix``)."""
        self._calls += 1
        self._seen.setdefault(domain, deque(maxlen=EXPLORE_WINDOW)).append(self._calls)
        arms = self.arms
        if len(arms) == 1:
            return self.decision(arms[0], f"pool-cap: only K={arms[0]} is available")
        if self.default in arms and self._rates.evidence(domain) <= 0:
            keep, why = self._keep(arms, loads, None)
            if busy is not None or self.default in keep:
                return self.decision(self.default, f"pool-cap: nothing measured in this domain yet: the "
                                                   f"default pool, K={self.default}")
            k = min(keep)  # pools of their own: the default is fuller than another
            return self.decision(k, f"pool-cap: nothing measured in this domain yet: K={k} {why} (the default "
                                    f"pool, K={self.default}, has more)")
        bands = {k: band(loads.get(k)) for k in arms}
        if busy is not None and not busy and any(bands.values()):
            burst = self._for_the_mix(domain, arms, bands)
            if burst is not None:
                return burst
        scored = [(k, self.predicted(domain, k, bands[k])) for k in arms]
        if any(s is None for _, s in scored):
            k = self._rng.choice(arms if busy is not None else sorted(self._keep(arms, loads, busy)[0]))
            return self.decision(k, f"pool-cap: nothing is measured yet, K={k} at random")
        self._chooses += 1
        known = [s[0] for _, s in scored if s[0] is not None]
        speed = self.request_speed(domain, max(known)) if known else 0.0
        self._best[domain] = (speed, self._chooses)
        if known and self._leaves_trying(domain, speed):
            scored = [(k, s) for k, s in scored if s[0] is not None]
        k, (mean, bound) = max(scored, key=lambda pair: (pair[1][1], -pair[0]))  # the smaller K on ties
        kept = self._kept(k, mean, scored, loads, busy)
        if kept is not None:
            return kept
        at = f" at load band {bands[k]}" if bands[k] else ""
        if mean is None:
            return self.decision(k, f"pool-cap: K={k} is not measured yet{at} (bound {bound:.0f} tok/s)")
        return self.decision(k, f"pool-cap: K={k} predicts {mean:.0f} tok/s{at} (bound {bound:.0f})")

    @staticmethod
    def _keep(arms: Collection[int], loads: Mapping[int, int],
              busy: Collection[int] | None) -> tuple[set[int], str]:
        """The pools the load would keep a request to, and why: on a shared machine those running now
        (``busy``: starting another splits the machine's batch), on pools of their own those with the fewest
        requests in flight (a server batches its requests in one pass, so two at 3 and 5 serve less than at 4
        and 4: off measured 43.5 tok/s a server at 2 in flight, 61.5 at 4, docs/load.md; and the load band
        5-8 costs a pool at 5 the same as at 8)."""
        if busy is not None:
            return set(busy), "is running on the machine the pools share"
        fewest = min(loads.get(j, 1) for j in arms)
        return {j for j in arms if loads.get(j, 1) == fewest}, "has the fewest requests in flight"

    def _kept(self, k: int, mean: float | None, scored: list, loads: Mapping[int, int],
              busy: Collection[int] | None) -> Decision | None:
        """The best of the pools the load would keep the request to (``_keep``; best by upper bound) instead
        of ``k`` outside them, unless ``k`` is predicted ``split_margin`` faster than it (so ``k`` leaves
        them only when both are measured at their loads); None: ``k`` stands."""
        keep, why = self._keep([j for j, _ in scored], loads, busy)
        held = [(j, s) for j, s in scored if j in keep]
        if k in keep or not held:
            return None
        j, (speed, bound) = max(held, key=lambda pair: (pair[1][1], -pair[0]))
        if mean is not None and speed is not None and mean >= (1.0 + self.split_margin) * speed:
            return None
        shown = f"{speed:.0f} tok/s" if speed is not None else f"not measured, bound {bound:.0f} tok/s"
        return self.decision(j, f"pool-cap: K={j} {why} ({shown} at load {loads.get(j, 1)}); K={k} is not "
                                f"predicted {self.split_margin:.0%} faster")

    def _for_the_mix(self, domain: str, arms: tuple[int, ...], bands: Mapping[int, int]) -> Decision | None:
        """The pool for a burst about to start on an idle shared machine: least sum over the recent domains of
        share / upper bound of goodput (the burst's time per token on that pool, optimistic); None until
        every pool has a bound in every one of those domains."""
        since = self._calls - EXPLORE_WINDOW
        mix = {d: n for d, calls in self._seen.items()
               if (n := sum(c > since for c in calls)) and (self._rates.evidence(d) > 0 or d == domain)}
        times: list[tuple[float, int]] = []
        for k in arms:
            bounds = [self.predicted(d, k, bands[k]) for d in mix]
            if any(b is None or b[1] <= 0 for b in bounds):
                return None
            times.append((sum(n / b[1] for n, b in zip(mix.values(), bounds)) / sum(mix.values()), k))
        seconds, k = min(times)
        at = f" at load band {bands[k]}" if bands[k] else ""
        return self.decision(k, f"pool-cap: a burst starts on the shared machine: K={k} serves the mix of "
                                f"{len(mix)} domain(s) fastest{at} (bound {1 / seconds:.0f} tok/s)")

    def request_speed(self, domain: str, goodput: float) -> float:
        """Tokens per second of a whole request of ``domain`` whose steps run at ``goodput``: with p its
        prompt seconds per emitted token (measured over its requests, 0 where the engine reports none),
        1 / (p + 1 / goodput). A copy domain at 80 tok/s of steps whose prompts take 10 ms a token answers at
        1 / (0.010 + 0.0125) = 44 tok/s; a chat domain at 70 tok/s with 1 ms a token at 65."""
        sums = self._prompts.get(domain)
        p = 0.0 if sums is None else sums.ratio(self._updates)
        return 1.0 / (p + 1.0 / goodput) if goodput > 0 else 0.0

    def _leaves_trying(self, domain: str, speed: float) -> bool:
        """Whether ``domain`` leaves pools no request has measured to another domain: one seen in the last
        ``EXPLORE_WINDOW`` choices answers slower at its best known pool (``request_speed``), or (none placed
        yet) this domain has fewer than ``THIN`` requests. Such a pool is tried in the slowest domain: a try
        that disappoints costs a domain whose best answers at 140 tok/s more than one whose best answers at
        60 (at 40 tok/s of steps, the first loses 71% of that request's speed, the second 33%); once
        measured, it is predicted everywhere."""
        since = self._chooses - EXPLORE_WINDOW
        others = [other_speed for other, (other_speed, at) in self._best.items()
                  if other != domain and at >= since]
        return min(others) < speed if others else self._rates.evidence(domain) < THIN

    def update(self, domain: str, outcome: Outcome) -> "PoolCap":
        """Learn from one request (or step); untimed ones and lookaheads outside 0..kmax carry nothing."""
        k, seconds, steps = outcome.lookahead, outcome.seconds, outcome.steps
        if not (0 <= k <= self.kmax and seconds > 0 and steps > 0):
            return self
        drafted = float(min(max(outcome.drafted, 0), k * steps))
        accepted = float(min(max(outcome.accepted, 0), drafted))
        b = band(outcome.load)
        costs = self._bands.get(b)
        if costs is None:
            costs = self._bands[b] = PoolCosts(self.cost_halflife)
        costs.add(k, float(steps), drafted, seconds)
        self._rates.add(domain, k, float(steps), accepted, drafted)
        prompts = self._prompts.get(domain)
        if prompts is None:
            prompts = self._prompts[domain] = DecayingSums(self.halflife)
        self._updates += 1
        prompts.add(self._updates, max(outcome.prompt_seconds, 0.0), float(outcome.emitted))
        return self

    def warm_start(self, domain: str, history: Sequence[ArmStats]) -> "PoolCap":
        """Start from stored totals: each pool as ``WARM_REQUESTS`` requests of the domain and of its cost
        (at load band 0: stored totals mix loads)."""
        self._rates.forget(domain)
        for h in history:
            k = h.lookahead
            seconds = h.draft_seconds + h.verify_seconds
            if not 0 <= k <= self.kmax or h.steps <= 0 or seconds <= 0:
                continue
            drafted = float(min(k * h.steps, k * h.steps if h.drafted is None else h.drafted))
            accepted = float(max(0, min(h.emitted - h.steps, drafted)))
            f = min(1.0, WARM_REQUESTS * WARM_STEPS / h.steps)
            self._rates.seed(domain, k, WARM_REQUESTS, f * h.steps, f * accepted, f * drafted)
            self._bands.setdefault(0, PoolCosts(self.cost_halflife)).seed(k, WARM_REQUESTS, float(h.steps),
                                                                          drafted, seconds)
        return self

    def reconsider(self) -> "PoolCap":
        """A model version changed: every domain's rates keep a tenth of their weight and at most a
        request's worth (as after a ``jump``), each pool's cost at most ``WARM_REQUESTS`` requests' worth:
        the new pair's first requests outweigh both at once while the domains go on being served from what
        was known."""
        self._rates.cut()
        for costs in self._bands.values():
            costs.doubt(WARM_REQUESTS)
        return self

    def forget(self, domain: str) -> "PoolCap":
        self._rates.forget(domain)
        self._best.pop(domain, None)
        self._prompts.pop(domain, None)
        self._seen.pop(domain, None)
        return self

    def __repr__(self) -> str:
        return (f"PoolCap(kmax={self.kmax}, halflife={self.halflife}, cost_halflife={self.cost_halflife}, "
                f"z={self.z}, default={self.default}, seed={self.seed})")
