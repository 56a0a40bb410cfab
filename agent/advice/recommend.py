"""``specwatch recommend``: the lookahead K (and on/off) each domain's stored history supports, and one K for
a whole pod, whose engine fixes K at start-up for every domain (agent/advice/engine_flags.py prints the flags).

Evidence: history of the latest target and draft versions only (agent/hub/warm.py: an older pair's acceptance
is what must not be trusted). Per domain and K, goodput is emitted tokens over step seconds (a ratio of
sums, K = 0 measured like any other K); its standard error comes from the spread of per-minute buckets
(delta method for a ratio, the buckets as clusters). A K counts only with ``min_steps`` steps in at least
``min_buckets`` minutes; a domain with no such K gets no recommendation ("not enough data").

Pod-wide: the K that maximises the pod's goodput over the domains' traffic, total tokens over total time
at that K, i.e. the token-weighted harmonic mean of the domains' goodputs (an arithmetic mean of rates
would favour the fast domains). Domains losing more than ``route_gain`` at the pod's K against their own
best are worth routing to a pool serving their K (``specwatch proxy --upstream kN=URL``, ``off``).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

from agent.hub.warm import arm_history, pair_since
from alerts.detectors.checks import check_at_least, check_count
from storage import Store
from storage.query import StatsQuery


@dataclass(frozen=True)
class RecommendConfig:
    """How much history a K needs to count, and how decisions are qualified (see the module docstring)."""

    min_steps: int = 200
    min_buckets: int = 3
    z: float = 2.0  # standard errors between the best K and the next for "clear"
    route_gain: float = 0.05  # goodput a domain gains on its own K before routing it is advised

    def __post_init__(self) -> None:
        check_count("min_steps", self.min_steps)
        check_count("min_buckets", self.min_buckets)
        check_at_least("z", self.z, 0)
        check_at_least("route_gain", self.route_gain, 0)


@dataclass(frozen=True)
class Arm:
    """One K of one domain: totals, minute buckets, goodput (tokens/s) and its standard error."""

    lookahead: int
    steps: int
    emitted: int
    seconds: float
    buckets: int
    goodput: float
    stderr: float | None
    enough: bool


@dataclass(frozen=True)
class DomainAdvice:
    domain: str
    lookahead: int | None  # None: not enough data
    tokens: int  # emitted in the range, every K: the domain's traffic
    reason: str
    arms: tuple[Arm, ...]

    @property
    def speculate(self) -> bool | None:
        return None if self.lookahead is None else self.lookahead > 0

    def goodput(self, k: int) -> float | None:
        arm = next((a for a in self.arms if a.lookahead == k and a.enough), None)
        return arm.goodput if arm else None


@dataclass(frozen=True)
class Route:
    domain: str
    lookahead: int
    gain: float  # own best goodput over goodput at the pod's K, minus 1


@dataclass(frozen=True)
class PodAdvice:
    lookahead: int | None  # None: no K measured enough in every domain with a recommendation
    goodput: float | None
    reason: str
    routes: tuple[Route, ...]


@dataclass(frozen=True)
class Recommendation:
    target_version: str | None
    draft_version: str | None
    since: float
    until: float
    domains: tuple[DomainAdvice, ...]
    pod: PodAdvice

    def to_dict(self) -> dict:
        out = asdict(self)
        for d, advice in zip(out["domains"], self.domains):
            d["speculate"] = advice.speculate
        return out


def recommend(store: Store, since: float | None = None, now: float | None = None, domain: str | None = None,
              config: RecommendConfig | None = None) -> Recommendation:
    """Per-domain and pod-wide advice from ``store``'s history in [since, now) of its latest versions."""
    config = config or RecommendConfig()
    now = time.time() if now is None else now
    target, draft = latest_pair(store)
    since = pair_since(store, draft, since, now)
    if target is None:
        return Recommendation(None, None, since, now, (), PodAdvice(None, None, "no history stored", ()))
    history = arm_history(store, target, draft, since=since, now=now)
    rows = store.stats(StatsQuery(since, now, ("domain", "target_version", "lookahead", "minute"), domain)).rows
    buckets: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for row in rows:
        if row["target_version"] == target and row["steps"]:
            seconds = ((row["draft_seconds_per_step"] or 0.0) + (row["verify_seconds_per_step"] or 0.0)) * row["steps"]
            buckets.setdefault((row["domain"], row["lookahead"]), []).append(
                (row["tokens_per_step"] * row["steps"], seconds))
    domains = []
    for name in sorted(history):
        if domain is not None and name != domain:
            continue
        arms = tuple(_arm(h.lookahead, h.steps, h.emitted, h.draft_seconds + h.verify_seconds,
                          buckets.get((name, h.lookahead), []), config)
                     for h in sorted(history[name], key=lambda h: h.lookahead))
        k, reason = choose(arms, config)
        domains.append(DomainAdvice(name, k, sum(a.emitted for a in arms), reason, arms))
    return Recommendation(target, draft, since, now, tuple(domains), pod_choice(domains, config))


def latest_pair(store: Store) -> tuple[str | None, str | None]:
    """The target and draft versions seen most recently in the store's version log (any pod)."""
    latest: dict[str, tuple[float, str]] = {}
    for v in store.versions():
        if v.last_seen >= latest.get(v.role, (-math.inf, ""))[0]:
            latest[v.role] = (v.last_seen, v.version)
    return latest.get("target", (0, None))[1], latest.get("draft", (0, None))[1]


def ratio_stderr(pairs: list[tuple[float, float]]) -> float | None:
    """Standard error of sum(e) / sum(s) over clusters (e, s) by the delta method; None under 2 clusters."""
    n = len(pairs)
    total_s = sum(s for _, s in pairs)
    if n < 2 or total_s <= 0:
        return None
    r = sum(e for e, _ in pairs) / total_s
    residual = sum((e - r * s) ** 2 for e, s in pairs) / (n - 1)
    return math.sqrt(residual / n) / (total_s / n)


def _arm(k: int, steps: int, emitted: int, seconds: float, pairs: list[tuple[float, float]],
         config: RecommendConfig) -> Arm:
    goodput = emitted / seconds if seconds > 0 else 0.0
    enough = seconds > 0 and steps >= config.min_steps and len(pairs) >= config.min_buckets
    return Arm(k, steps, emitted, seconds, len(pairs), goodput, ratio_stderr(pairs), enough)


def choose(arms: tuple[Arm, ...], config: RecommendConfig) -> tuple[int | None, str]:
    """The K of best goodput among arms with enough evidence, and why (how clear, whether K = 0 was
    measured); (None, "not enough data ...") when no arm qualifies."""
    ok = sorted((a for a in arms if a.enough), key=lambda a: -a.goodput)
    if not ok:
        return None, (f"not enough data (a K needs {config.min_steps} steps in {config.min_buckets} minutes; "
                      f"seen: {', '.join(f'K={a.lookahead} {a.steps} steps' for a in arms) or 'none'})")
    best = ok[0]
    why = f"K={best.lookahead}: {best.goodput:.1f} tok/s"
    if len(ok) > 1:
        second = ok[1]
        se = math.hypot(best.stderr or 0.0, second.stderr or 0.0)
        margin = (best.goodput - second.goodput) / se if se > 0 else math.inf
        verdict = "clear" if margin >= config.z else "within noise"
        why += f", {verdict} over K={second.lookahead} ({second.goodput:.1f})"
    if not any(a.lookahead == 0 for a in ok):
        why += "; K=0 not measured enough: whether speculation pays is untested"
    return best.lookahead, why


def pod_choice(domains: list[DomainAdvice], config: RecommendConfig) -> PodAdvice:
    """The K of best traffic-weighted goodput over domains with a recommendation (module docstring)."""
    judged = [d for d in domains if d.lookahead is not None and d.tokens > 0]
    if not judged:
        return PodAdvice(None, None, "not enough data in any domain", ())
    common = set.intersection(*({a.lookahead for a in d.arms if a.enough} for d in judged))
    if not common:
        return PodAdvice(None, None, "no K measured enough in every domain", ())
    tokens = sum(d.tokens for d in judged)

    def pod_goodput(k: int) -> float:
        return tokens / sum(d.tokens / d.goodput(k) for d in judged)

    k = max(sorted(common), key=pod_goodput)
    routes = []
    for d in judged:
        own, there = d.goodput(d.lookahead), d.goodput(k)
        if d.lookahead != k and own > there * (1 + config.route_gain):
            routes.append(Route(d.domain, d.lookahead, own / there - 1))
    left_out = [d.domain for d in domains if d not in judged]
    reason = f"K={k}: {pod_goodput(k):.1f} tok/s over {len(judged)} domains' traffic"
    if left_out:
        reason += f" (not enough data: {', '.join(left_out)})"
    return PodAdvice(k, pod_goodput(k), reason, tuple(routes))


def pool_name(k: int) -> str:
    """The proxy's pool name for lookahead ``k`` (``specwatch proxy --upstream NAME=URL``)."""
    return f"k{k}" if k else "off"
