"""Benchmark (offline, cheap): pool policies on simulated pools whose K is a cap (bench/ngram_world.py).

Pools off (40 tok/s), n-gram self-speculation capped at 8, 24 and 64 (k64 the default pool, as llama.cpp's
--spec-default), and a draft-model pool drafting exactly 4 a step; three domains whose best pools differ
(code k64, logs k8, chat the draft model), 200 requests each, interleaved at random. Per policy and domain:
tokens/s over the best fixed pool's on the same requests, over all 200 requests and over the domain's first
20 (goals: >= 95% and >= 90%), mean and worst over the seeds, and in how many seeds each goal is met.
Beside pool-cap: a deliberately broken variant that shares a pool's seconds per step across domains
without the drafted term (``NoDrafted``), and the policies that came before it. Not a test: prints a table
and writes bench/results/pool_cap_sim.json.

    python bench/pool_cap_sim.py [--seeds 16] [--rounds 200] [--policies pool-cap,no-drafted-term]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.ngram_world import POOLS, NgramWorld  # noqa: E402
from bench.pool_world import goodput, run  # noqa: E402
from policies import registry  # noqa: E402
from policies.pool_cap import PoolCap  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "pool_cap_sim.json"
ARMS = sorted(k for _, k in POOLS.values())
DEFAULT_POOL = 64
GOALS = (0.95, 0.90)  # over all requests, over each domain's first FIRST
FIRST = 20
DEFAULT = ("pool-cap", "pool-cap+switch", "no-drafted-term", "pool-model+switch", "pool-ucb")


class NoDrafted(PoolCap):
    """The broken variant: a pool's seconds per step shared by every domain without the drafted term (one
    mean per pool, as pool-model keeps it), so a domain whose steps draft 15 tokens is predicted at the
    cost of another's steps drafting 3."""

    name = "no-drafted-term"

    def predicted(self, domain: str, k: int, b: int = 0):
        found = super().predicted(domain, k, b)
        line = self.costs(b).line(k) if found is not None else None
        if found is None or found[0] is None or line is None:
            return found
        rates = self._rates.predict(domain, k) if k else None
        accepted, accepted_se = (rates.accepted, rates.accepted_se) if rates else (0.0, 0.0)
        seconds = line.seconds(line.x_mean)  # the pool's mean step over everyone's requests
        low = max(seconds - self.z * line.stderr(line.x_mean), 0.5 * seconds)
        return (1.0 + accepted) / seconds, (1.0 + accepted + self.z * accepted_se) / low


def make(name: str, seed: int):
    policy = NoDrafted(kmax=64, seed=seed) if name == "no-drafted-term" else registry.make(name, kmax=64, seed=seed)
    inner = getattr(policy, "policy", policy)
    if callable(getattr(inner, "restrict", None)):
        inner.restrict(ARMS)
    return policy.prefer(DEFAULT_POOL)


def one(name: str, seed: int, rounds: int) -> dict[str, tuple[float, float]]:
    """Per domain: (share of the best fixed pool over ``rounds`` requests, over the first ``FIRST``)."""
    world = NgramWorld(seed=seed)
    got = run(make(name, seed), world, list(world.domains), rounds, rng=random.Random(seed))
    out = {}
    for d, outs in got.items():
        best = max(world.fixed_goodput(d, k, range(rounds)) for k in ARMS)
        best_first = max(world.fixed_goodput(d, k, range(FIRST)) for k in ARMS)
        out[d] = (goodput(outs) / best, goodput(outs[:FIRST]) / best_first)
    return out


def evaluate(name: str, seeds: range, rounds: int = 200) -> dict[str, dict]:
    """Per domain: mean and worst share over the seeds, and seeds meeting each goal, over all requests
    (``all``) and over the first ``FIRST`` (``first``)."""
    runs = [one(name, seed, rounds) for seed in seeds]
    out = {}
    for d in runs[0]:
        out[d] = {}
        for i, (part, goal) in enumerate(zip(("all", "first"), GOALS)):
            shares = [r[d][i] for r in runs]
            out[d][part] = {"mean": statistics.fmean(shares), "min": min(shares),
                            "seeds_meeting": sum(s >= goal for s in shares)}
    return out


def best_pools(seed: int = 0, rounds: int = 200) -> dict[str, tuple[str, float]]:
    world = NgramWorld(seed=seed)
    names = {k: name for name, (_, k) in POOLS.items()}
    return {d: max(((names[k], world.fixed_goodput(d, k, range(rounds))) for k in ARMS), key=lambda p: p[1])
            for d in world.domains}


def main() -> None:
    from rich.console import Console
    from rich.table import Table

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--policies", default=",".join(DEFAULT))
    args = ap.parse_args()
    seeds = range(args.seeds)
    best = best_pools(rounds=args.rounds)
    table = Table(title=f"share of the best fixed pool over {args.rounds} requests / over the first {FIRST}: mean "
                        f"(worst) over {args.seeds} seeds; seeds meeting >= 95% / >= 90%")
    table.add_column("policy")
    for d, (pool, speed) in best.items():
        table.add_column(f"{d} (best {pool}, {speed:.0f} tok/s)", justify="right")
    result = {"seeds": args.seeds, "rounds": args.rounds, "first": FIRST, "default_pool": f"k{DEFAULT_POOL}",
              "best_fixed_pool": best, "policies": {}}
    for name in args.policies.split(","):
        scores = evaluate(name, seeds, args.rounds)
        result["policies"][name] = scores
        table.add_row(name, *(f"{s['all']['mean']:.1%} ({s['all']['min']:.0%}) / {s['first']['mean']:.1%} "
                              f"({s['first']['min']:.0%}); {s['all']['seeds_meeting']} / {s['first']['seeds_meeting']}"
                              for s in scores.values()))
    Console(width=200).print(table)
    RESULTS.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
