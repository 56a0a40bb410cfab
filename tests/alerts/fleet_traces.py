"""Synthetic fleet traces for the FleetOutlier tests: per pod, accept counts per minute bucket of one domain
and pair, with the correlation real traffic has (each request draws its own acceptance from a beta around
the pod's mean, and its steps share it) and pods that differ a little (their traffic differs)."""

from __future__ import annotations

import numpy as np

Buckets = dict[str, list[tuple[int, int]]]


def pod_buckets(rng: np.random.Generator, mean: float, buckets: int = 30, requests: float = 8.0,
                steps: tuple[int, int] = (5, 40), concentration: float = 4.0) -> list[tuple[int, int]]:
    """``buckets`` (verified positions, accepted) of one pod: Poisson(``requests``) requests a bucket, each
    of a uniform number of ``steps`` first positions accepted with the request's own Beta rate."""
    per_bucket = rng.poisson(requests, buckets)
    total = int(per_bucket.sum())
    n = rng.integers(steps[0], steps[1], total)
    k = rng.binomial(n, rng.beta(mean * concentration, (1 - mean) * concentration, total))
    edges = np.concatenate(([0], np.cumsum(per_bucket)))
    sums_n, sums_k = np.concatenate(([0], np.cumsum(n))), np.concatenate(([0], np.cumsum(k)))
    return [(int(sums_n[b] - sums_n[a]), int(sums_k[b] - sums_k[a])) for a, b in zip(edges[:-1], edges[1:])]


def fleet(rng: np.random.Generator, means: dict[str, float], spread: float = 0.02,
          traffic: dict[str, float] | None = None, **kw) -> Buckets:
    """Buckets per pod; each pod's mean moved by Normal(0, ``spread``) (pods' traffic differs)."""
    traffic = traffic or {}
    return {pod: pod_buckets(rng, float(np.clip(m + rng.normal(0, spread), 0.02, 0.98)),
                             requests=traffic.get(pod, 8.0), **kw) for pod, m in means.items()}


PODS = tuple(f"llm-{i}" for i in range(6))
DOMAINS = {"code": 0.8, "chat": 0.6, "logs": 0.45}
# quiet pods: a few requests a minute put them just over the evidence needed
TRAFFIC = {"llm-0": 12.0, "llm-1": 10.0, "llm-2": 8.0, "llm-3": 8.0, "llm-4": 5.0, "llm-5": 5.0}


def evaluation(rng: np.random.Generator, planted: tuple[str, str, float] | None = None,
               spread: float = 0.02) -> dict[str, Buckets]:
    """One evaluation of the fleet: buckets per domain (one pair). ``planted``: (pod, domain, drop) makes
    that pod's acceptance in that domain ``drop`` lower."""
    out = {}
    for domain, mean in DOMAINS.items():
        means = {p: mean - (planted[2] if planted and planted[:2] == (p, domain) else 0.0) for p in PODS}
        out[domain] = fleet(rng, means, spread, TRAFFIC)
    return out
