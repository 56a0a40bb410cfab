"""Benchmark (offline, cheap): pool policies on simulated llama.cpp pools (bench/pool_world.py).

Pools off, k2, k4, k8 with step costs like bench/engine_llamacpp.py's full kit; four domains, 24 requests
each per phase, interleaved at random. Phase v1: the draft fits (best pools k4, k2, off, k4); phase v2: a
target update leaves it stale in three domains (acceptance about halves; off is best there), with no
``reconsider()`` (the policy must follow the change from acceptance alone). Per policy, domain and phase:
tokens/s over the best fixed pool's on the same requests (the engine benchmark's goal: >= 95%), over
several seeds; and requests after the update before a stale domain is on ``off`` for the rest of the phase
(goal: within 50), counted to the first of five requests in a row on ``off``. Not a test: prints a table and writes bench/results/pool_policy_sim.json.

    python bench/pool_policy_sim.py [--seeds 16] [--rounds 24] [--policies pool-ucb+switch,pool-model]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.pool_world import POOLS, PoolWorld, goodput, run  # noqa: E402
from policies import registry  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "pool_policy_sim.json"
PHASES = {"v1": {"code": 0.97, "prose": 0.9, "logs": 0.8, "chat": 0.94},
          "v2": {"code": 0.96, "prose": 0.45, "logs": 0.4, "chat": 0.47}}
DEFAULT = ("pool-ucb+switch", "pool-ucb", "pool-model", "pool-model+switch")
GOAL = 0.95


def restrict(policy, arms):
    for p in (policy, getattr(policy, "policy", None)):
        if p is not None and callable(getattr(p, "restrict", None)):
            p.restrict(arms)
    return policy


def one(name: str, seed: int, rounds: int) -> dict:
    """Per phase and domain: share of the best fixed pool, and (stale domains) requests until off for good."""
    world = PoolWorld(dict(PHASES["v1"]), seed=seed)
    policy = restrict(registry.make(name, kmax=8, seed=seed), sorted(POOLS.values()))
    out: dict = {}
    for i, (phase, accept) in enumerate(PHASES.items()):
        world.accept = dict(accept)
        start = i * rounds
        got = run(policy, world, list(accept), rounds, start, random.Random(seed * 31 + i))
        for d, outs in got.items():
            idx = range(start, start + rounds)
            best = max(world.fixed_goodput(d, k, idx) for k in POOLS.values())
            ks = [o.lookahead for o in outs]
            settled = next((j for j in range(len(ks) - 4) if not any(ks[j:j + 5])), None)  # 5 off in a row
            out[(phase, d)] = (goodput(outs) / best, settled)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=24)
    ap.add_argument("--policies", default=",".join(DEFAULT))
    args = ap.parse_args()
    names = args.policies.split(",")
    rows = {n: [one(n, s, args.rounds) for s in range(args.seeds)] for n in names}
    table = Table(title=f"share of the best fixed pool, mean (min) over {args.seeds} seeds, "
                        f"{args.rounds} requests per domain and phase")
    keys = [(p, d) for p, acc in PHASES.items() for d in acc]
    for col in ["policy"] + [f"{p} {d}" for p, d in keys] + [">= 95%", "stale: off after"]:
        table.add_column(col, justify="left" if col == "policy" else "right")
    result = {"seeds": args.seeds, "rounds": args.rounds, "phases": PHASES, "policies": {}}
    for n, runs in rows.items():
        cells, per = [], {}
        for key in keys:
            shares = [r[key][0] for r in runs]
            per[f"{key[0]}/{key[1]}"] = {"mean": statistics.fmean(shares), "min": min(shares)}
            cells.append(f"{statistics.fmean(shares):.1%} ({min(shares):.0%})")
        met = sum(r[k][0] >= GOAL for r in runs for k in keys) / (len(runs) * len(keys))
        stale = [r[("v2", d)][1] for r in runs for d, a in PHASES["v2"].items() if a < PHASES["v1"][d] / 1.5]
        worst = None if None in stale else max(stale)
        cells += [f"{met:.0%}", "never" if worst is None else f"<= {worst}"]
        table.add_row(n, *cells)
        result["policies"][n] = {"share_of_best": per, "rows_meeting_goal": met, "stale_off_after_max": worst}
    Console(width=200).print(table)
    RESULTS.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
