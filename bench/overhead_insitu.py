"""Benchmark: the sidecar's hot path inside real decoding: inline, background ingest, step ring, deferred ring.

bench/overhead.py times ``decide`` + ``record`` in a warm closed loop. Inside a real decoding loop the same
Python runs right after the models' forward passes, with cold caches, and a worker thread shares the GIL
with the decoder. Here the full kit's target v1 and draft decode held-out prompts of every domain, steered
by a Sidecar (the default policy, drift watch, metrics, alert manager) through ``agent.decoding.steer.generate_with``;
the time each step spends in ``record`` + ``decide`` on the decoding thread is recorded, with the decode
throughput and the CPU spent per step off the decoding thread. Four modes alternate, ``--rounds`` times
each: inline, background ingest (a worker thread, sharing the GIL), the step ring to a real
``specwatch serve --ring`` process (agent/ring/client.py; that process's CPU, HTTP server and scheduler
included, is the off-thread CPU), and the same ring with a packer thread (agent/ring/deferred.py: ``record``
only queues; the packer's CPU is off the decoding thread but in its process, as the ingest worker's is).

Not a test: prints a table and writes bench/results/overhead_insitu.json. Run on an idle machine.

    python bench/overhead_insitu.py [--prompts 6] [--tokens 64] [--rounds 2] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.decoding.decoder import SpeculativeDecoder  # noqa: E402
from agent.decoding.steer import generate_with  # noqa: E402
from agent.hub.sidecar import Sidecar  # noqa: E402
from agent.kit.load import load_kit  # noqa: E402
from agent.runtime.config import SidecarConfig  # noqa: E402
from bench.overhead import GOAL_US, components  # noqa: E402
from bench.sidecar_process import over_ring  # noqa: E402
from policies.registry import make  # noqa: E402
from storage import Store, StoreConfig  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "overhead_insitu.json"
MODES = ("inline", "background ingest", "step ring (sidecar process)", "deferred step ring (packer thread)")


def run(decoder, prompts, tokens: int, mode: str, policy: str, tmp: Path, n: int) -> dict:
    """One pass over ``prompts``: the hot path per step, decode throughput, CPU spent off the decoding
    thread per step (the ingest worker's, or the whole sidecar process's)."""
    if mode in MODES[2:]:
        out, _, cpu = over_ring(lambda client: decode(client, decoder, prompts, tokens),
                                f"specwatch-insitu-{os.getpid()}-{n}", policy, 0, tmp / f"ring-{n}",
                                deferred=mode == MODES[3], pod="bench")
        # the packer thread's CPU is off the decoding thread but in its process
        out["worker_cpu_us_per_step"] = (cpu["sidecar"] + cpu["packer"]) / out["steps"] * 1e6
        out["in_process_cpu_us_per_step"] = cpu["packer"] / out["steps"] * 1e6
        return out
    store = Store.open(f"sqlite:///{tmp / f'insitu-{n}.db'}", StoreConfig(pod="bench"))
    background = mode == MODES[1]
    sidecar = Sidecar(store, make(policy, kmax=8, seed=0), pod="bench", background=background,
                      **components(store))
    try:
        out = decode(sidecar, decoder, prompts, tokens)
        out["worker_cpu_us_per_step"] = sidecar.ingest.cpu_seconds / out["steps"] * 1e6 if background else 0.0
        out["in_process_cpu_us_per_step"] = out["worker_cpu_us_per_step"]
    finally:
        sidecar.close()
    return out


def decode(sidecar, decoder, prompts, tokens: int) -> dict:
    hot: list[int] = []
    emitted, started = 0, time.perf_counter()
    for domain, ids in prompts:
        emitted += len(generate_with(sidecar, decoder, ids, tokens, domain, hot_path_ns=hot).tokens)
    seconds = time.perf_counter() - started
    us = sorted(x / 1000 for x in hot)
    return {"steps": len(us), "median_us": statistics.median(us), "p99_us": us[int(0.99 * (len(us) - 1))],
            "mean_us": statistics.fmean(us), "tokens_per_second": emitted / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=6, help="held-out prompts per domain")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the demo's default)")
    parser.add_argument("--policy", default=SidecarConfig().policy)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    kit = load_kit("full")
    decoder = SpeculativeDecoder(kit.target_v1, kit.draft, target_version=kit.versions["target-v1"],
                                 draft_version=kit.versions["draft"])
    prompts = [(d, p) for d in kit.domains for p in kit.prompt_ids(d)[: args.prompts]]
    load = os.getloadavg()
    runs: dict[str, list[dict]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        run(decoder, prompts[:2], 16, MODES[0], args.policy, Path(tmp), -1)  # warm-up
        for r in range(args.rounds):
            for mode in MODES[r % len(MODES):] + MODES[:r % len(MODES)]:  # each round starts with another mode
                runs[mode].append(run(decoder, prompts, args.tokens, mode, args.policy, Path(tmp),
                                      r * len(MODES) + MODES.index(mode)))  # a database and ring name each
    rows = {m: {k: statistics.median(x[k] for x in rs) for k in rs[0]} for m, rs in runs.items()}
    table = Table(title=f"hot path inside real decoding (full kit, {args.policy}, {len(prompts)} requests x "
                        f"{args.tokens} tokens, median of {args.rounds} rounds; goal <= {GOAL_US:g} us)")
    for col in ("mode", "steps", "record + decide median us", "p99 us", "mean us", "decode tok/s",
                "CPU off the decoding thread us/step", "of it in the decoding process"):
        table.add_column(col, justify="left" if col == "mode" else "right")
    for mode, r in rows.items():
        table.add_row(mode, f"{r['steps']:.0f}", f"{r['median_us']:.1f}", f"{r['p99_us']:.1f}",
                      f"{r['mean_us']:.1f}", f"{r['tokens_per_second']:.1f}", f"{r['worker_cpu_us_per_step']:.1f}",
                      f"{r['in_process_cpu_us_per_step']:.1f}")
    Console(width=150).print(table)
    RESULTS.write_text(json.dumps({
        "benchmark": "overhead_insitu", "policy": args.policy, "prompts_per_domain": args.prompts,
        "tokens": args.tokens, "rounds": args.rounds, "threads": args.threads, "goal_us": GOAL_US,
        "load_average_at_start": load, "python": platform.python_version(), "torch": torch.__version__,
        "cpus": os.cpu_count(), "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rows": rows, "runs": runs}, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
