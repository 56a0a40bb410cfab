"""Benchmark (offline, seconds): the proxy's policy replayed over the last real-model run's own measurements.

bench/real_model.py sends every held-out prompt to every fixed pool and logs what each engine reported
(tokens, drafted, accepted, prompt and total time) and the wall time at the client. Here a policy routes
the same request stream again: request i of a domain sent to pool p gets what pool p measured on that very
prompt, as the record the proxy would have stored (decoding time as ``seconds``, the prompt's time as
``prompt_seconds``), and is valued at that pool's wall time. So a change to a policy is checked against the
real engines' figures in seconds instead of a 50-minute run; the run itself stays the judge (it adds the
path through the proxy, 1-2 ms a request, and the engines' own variation between twin servers).

Beside the policy as the proxy runs it: the same policy fed records without the prompt's time (an engine
that reports none, as every record before ``prompt_seconds``): it sends a pool no request has measured to
the domain of the lowest decoding speed, whatever its requests' whole time. Not a test: prints a table and
writes bench/results/real_model_replay.json.

    python bench/real_model_replay.py [--log bench/results/real_model.json] [--policy pool-cap+switch]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.real_model import DRAFT_DEFAULT, POOLS, PROXY, RESULTS, SPEC_DEFAULT, rate  # noqa: E402
from policies import registry  # noqa: E402
from policies.base import Outcome  # noqa: E402

OUT = Path(__file__).parent / "results" / "real_model_replay.json"
FIRST = 20
VARIANTS = {"as the proxy runs it": True, "without the prompt's time": False}


def outcome(row: dict, k: int, prompt: bool) -> Outcome:
    """The record the proxy stores for a logged answer: ``engine`` (prompt + decoding) minus ``prompt``."""
    steps = max(1, row["n"] - row["accepted"])
    decode = max(row["engine"] - row.get("prompt", 0.0), 1e-6)
    return Outcome(k, row["accepted"], row["n"], 0.0, decode, steps=steps, seconds=decode, drafted=row["drafted"],
                   prompt_seconds=row.get("prompt", 0.0) if prompt else None)


def replay(log: dict, policy_name: str, default: str | None, prompt: bool, seed: int = 0) -> dict:
    """Per domain, the rows of the pools the policy chose, request by request, domains interleaved as the run
    sent them."""
    policy = registry.make(policy_name, kmax=64, seed=seed)
    inner = getattr(policy, "policy", policy)
    inner.restrict(sorted(k for _, k in POOLS.values()))
    if default:
        policy.prefer(default)
    name_of = {k: name for name, (_, k) in POOLS.items()}
    chosen: dict[str, list[dict]] = {d: [] for d in log}
    for i in range(min(len(rows[PROXY]) for rows in log.values())):
        for domain, rows in log.items():
            k = policy.choose(domain).lookahead
            row = rows[name_of[k]][i]
            chosen[domain].append({**row, "pool": name_of[k]})
            policy.update(domain, outcome(row, k, prompt))
    return chosen


def shares(by: dict, rows: list[dict]) -> dict:
    n = len(rows)
    best = max(rate(by[c][:n]) for c in POOLS)
    best20 = max(rate(by[c][:FIRST]) for c in POOLS)
    return {"vs_best": rate(rows) / best, "vs_best_20": rate(rows[:FIRST]) / best20,
            "vs_spec_default": rate(rows) / rate(by[SPEC_DEFAULT][:n]),
            "vs_draft_default": rate(rows) / rate(by[DRAFT_DEFAULT][:n]),
            "pools": {p: sum(r["pool"] == p for r in rows) for p in POOLS},
            "pools_20": {p: sum(r["pool"] == p for r in rows[:FIRST]) for p in POOLS}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", type=Path, default=RESULTS, help="a run of bench/real_model.py")
    parser.add_argument("--policy", default="pool-cap+switch", help="the proxy's default with an off pool")
    parser.add_argument("--default-pool", default=SPEC_DEFAULT)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    run = json.loads(args.log.read_text())
    log = run["log"]
    if not all("prompt" in r for rows in log.values() for r in rows[PROXY]):
        raise SystemExit(f"{args.log}: a run from before the prompt's time was logged; run bench/real_model.py")
    out = {"log": str(args.log), "policy": args.policy, "default_pool": args.default_pool, "variants": {}}
    out["measured"] = {d: shares(by, by[PROXY]) for d, by in log.items()}
    for label, prompt in VARIANTS.items():
        chosen = replay(log, args.policy, args.default_pool, prompt)
        out["variants"][label] = {d: shares(log[d], rows) for d, rows in chosen.items()}
    table = Table(title=f"{args.policy} replayed over {args.log.name} ({run['requests']} requests per domain): "
                        "tokens/s against the fixed pools on the same prompts")
    for col in ("policy", "domain", "vs best", f"vs best, first {FIRST}", "vs k64 (spec-default)",
                "vs k3 (draft default)", f"draft pools tried (first {FIRST} / all)"):
        table.add_column(col, justify="left" if col in ("policy", "domain") else "right")
    for label, by in {"the proxy, measured": out["measured"], **out["variants"]}.items():
        for d, s in by.items():
            tried = sum(s["pools_20"][p] for p in ("k2", "k3")), sum(s["pools"][p] for p in ("k2", "k3"))
            table.add_row(label, d, f"{s['vs_best']:.1%}", f"{s['vs_best_20']:.1%}", f"{s['vs_spec_default']:.1%}",
                          f"{s['vs_draft_default']:.1%}", f"{tried[0]} / {tried[1]}")
    Console(width=200).print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
