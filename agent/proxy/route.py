"""Choosing the pool for a request: the sidecar's decision for the domain (its policy's arms are the
lookaheads of the pools that are up), mapped to a pool; a decision for a pool that is down falls back to
another healthy pool serving the same target version (the nearest lookahead). With one pool the proxy
observes and recommends only: every request goes there."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from agent.proxy.inflight import InFlight
from agent.proxy.pools import Pool, Pools
from agent.hub.sidecar import Sidecar
from policies.base import Decision

log = logging.getLogger("specwatch.proxy")


class NoPool(Exception):
    """No pool is healthy."""


@dataclass(frozen=True, slots=True)
class Route:
    pool: Pool
    decision: Decision


class Router:
    def __init__(self, sidecar: Sidecar, pools: Pools, default_pool: str | None = None, shared_load: bool = False):
        self.sidecar, self.pools, self.default_pool = sidecar, pools, default_pool
        self.shared_load = shared_load
        self.observe_only = len(pools.all) == 1
        self.restrictable = _restrictable(sidecar.policy)
        self._shape: tuple[tuple[int, ...], int | None] = ((), None)

    def refresh(self) -> None:
        """The pools changed: the policy chooses among the lookaheads of the healthy ones, and starts a domain
        without evidence on the default pool at the K its engine reports now."""
        arms = tuple(sorted({p.lookahead for p in self.pools.healthy()}))
        default = self.pools.by_name[self.default_pool].lookahead if self.default_pool is not None else None
        policy = self.restrictable
        if arms and (arms, default) != self._shape and policy is not None:
            usable = tuple(k for k in arms if k <= policy.kmax)
            if usable != arms:  # only a policy built with a smaller kmax than the proxy's own (tests, a library)
                log.warning("pools of K in %s are over the policy's kmax %d: it never routes there",
                            [k for k in arms if k > policy.kmax], policy.kmax)
            if default is not None and default > policy.kmax:
                default = None
            if usable:
                self.sidecar.adjust_policy(lambda p: _shape(p, usable, default))
                log.info("policy arms now K in %s%s", list(usable),
                         "" if default is None else f", default K={default} ({self.default_pool})")
        self._shape = (arms, default)

    def choose(self, domain: str) -> Route:
        healthy = self.pools.healthy()
        if not healthy:
            raise NoPool("no upstream pool is healthy")
        if self.observe_only:
            pool = healthy[0]
            return Route(pool, Decision(pool.lookahead, pool.lookahead > 0, "one pool: observe and recommend only",
                                        "proxy"))
        busy = {p.lookahead for p in healthy if p.inflight} if self.shared_load else None
        decision = self.sidecar.decide(domain, loads(healthy, self.pools.meter if self.shared_load else None), busy)
        return Route(self.pool_for(decision.lookahead, healthy), decision)

    def pool_for(self, lookahead: int, healthy: list[Pool]) -> Pool:
        """The healthy pool with this lookahead, else (it is down, or a probe asked for a K no pool has) the
        healthy pool of the nearest lookahead serving the target that pool served."""
        for p in healthy:
            if p.lookahead == lookahead:
                return p
        wanted = next((p for p in self.pools.all if p.lookahead == lookahead), None)
        same = [p for p in healthy if wanted is None or p.target_version == wanted.target_version] or healthy
        return min(same, key=lambda p: (abs(p.lookahead - lookahead), p.lookahead))

    def next_pool(self, lookahead: int | None, tried: list[Pool]) -> Pool | None:
        """The next-best healthy pool after ``tried`` could not be reached: the one ``pool_for`` gives among the
        rest (any when ``lookahead`` is None, a request the proxy does not inspect), or None."""
        left = [p for p in self.pools.healthy() if p not in tried]
        if not left:
            return None
        return left[0] if lookahead is None else self.pool_for(lookahead, left)

    def latest(self, domain: str) -> Route | None:
        """The route of the domain's latest decision, without deciding (GETs create no state)."""
        healthy = self.pools.healthy()
        if not healthy:
            return None
        if self.observe_only:
            return self.choose(domain)
        decision = self.sidecar.latest(domain)
        return None if decision is None else Route(self.pool_for(decision.lookahead, healthy), decision)


def loads(healthy: list[Pool], shared: InFlight | None = None) -> dict[int, int]:
    """The load a request would meet on the pool of each K: the requests in flight there, it included (the
    least where two pools share a K). ``shared``: the meter of every pool, where the pools share one machine:
    their load is the clients' whatever the routing, so a request meets what the last ones met over their
    lives where that is more (``InFlight.ahead``: the first request of a burst is scored as the burst). A
    pool of its own has the load the routing gives it: an idle one is idle, whatever it ran before."""
    if shared is not None:
        load = shared.ahead()
        return {p.lookahead: load for p in healthy}
    out: dict[int, int] = {}
    for p in healthy:
        load = p.inflight + 1
        if out.get(p.lookahead, load) >= load:
            out[p.lookahead] = load
    return out


def _shape(policy, arms: tuple[int, ...], default: int | None) -> None:
    """Restrict ``policy`` (or the one a wrapper holds) to ``arms``; name ``default`` its default arm."""
    _restrictable(policy).restrict(arms)
    if default is not None:
        policy.prefer(default)


def _restrictable(policy):
    """The policy (or the one a wrapper such as Switched holds) that can restrict its arms."""
    for candidate in (policy, getattr(policy, "policy", None)):
        if candidate is not None and callable(getattr(candidate, "restrict", None)):
            return candidate
    return None
