"""Benchmark: the best pool per domain and per load, on a real model (SmolLM2-135M-Instruct in F16, converted
from its package's GGUF by llama-quantize: agent/pretrained/f16.py).

Pools, each a llama-server of its own with --slots slots: ``off`` (no speculation) and
n-gram self-speculation (ngram-mod capped at 8 and 24: ``k8``, ``k24``). The proxy routes among a second set
of the same pools (no server sees a prompt twice: ngram-mod learns from all a server decodes), deciding per
domain and per the load each pool has at that moment (requests in flight there). Both sets run for the whole
benchmark; the load levels come one after the other (1, then 4, then 8 requests in flight at the client),
so the proxy carries what it learnt at one level to the next, as a deployment whose load changes would.

At each level, a mixed stream of held-out ``chat`` and ``copy`` prompts (alternating), greedy, --tokens
tokens; requests go in blocks of 4 x the level, each block through every configuration in turn (rotating
order: background load hits them alike), the level's requests in flight at once. Per configuration and
level: throughput (tokens over the wall time of its blocks), and per domain the rate of a request (its
tokens over its wall time, summed over the domain's requests). Goals (issue: decisions that know the load):
the proxy >= 95% of the best fixed pool per domain at every level, and >= the engine-style schedule (the
best fixed pool per level over both domains, chosen offline) in throughput on the mixed stream.

Every server runs one thread pinned to the same core (--threads 1, --cores 0), so every configuration,
the proxy's included, computes on exactly one core whether it uses one pool or splits a level between
three (the client and the proxy run on the other). Servers of several threads sharing cores wait on each
other at every synchronisation of a step: the proxy's three 2-thread servers on 2 cores, while it split 4
requests in flight between them, ran 0.5-1 token per second against 70 for one server alone. Not a test:
prints a table and writes bench/results/load_aware.json.

    python bench/load_aware.py [--levels 1,4,8] [--requests 48] [--tokens 64] [--pools off,k8,k24]
    python bench/load_aware.py --show       # the last run's table again
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.engines.llamacpp import LlamaServer, LlamaServerConfig, free_port  # noqa: E402
from agent.pretrained.f16 import f16_target  # noqa: E402
from agent.pretrained.prepare import Prepared  # noqa: E402
from agent.pretrained.prompts import prompts as prompt_set  # noqa: E402
from bench.engine_llamacpp import start_proxy  # noqa: E402
from bench.real_model import ask  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "load_aware.json"
LOOKAHEAD = {"off": 0, "k8": 8, "k24": 24}
PROXY = "proxy"
DOMAINS = ("chat", "copy")
console = Console(stderr=True)


def config(model: Path, name: str, slots: int, threads: int, poll: int = 0) -> LlamaServerConfig:
    k = LOOKAHEAD[name]
    # --poll 0: a thread waiting for work sleeps instead of spinning (servers share cores)
    return LlamaServerConfig(model=model, speculation="ngram-mod" if k else "draft", lookahead=k,
                             threads=threads, parallel=slots, ctx_size=2048 * slots, metrics=True,
                             extra_args=("--poll", str(poll)))


def streams(levels: list[int], requests: int) -> dict[int, list[tuple[str, object]]]:
    """Per level, its mixed stream: ``requests`` held-out prompts of each domain, alternating; no prompt is
    sent at two levels."""
    sets = {d: prompt_set(d, "heldout") for d in DOMAINS}
    need = requests * len(levels)
    for d, s in sets.items():
        if len(s) < need:
            raise SystemExit(f"{d}: {len(s)} held-out prompts, {need} needed: lower --requests")
    return {level: [(d, sets[d][i * requests + j]) for j in range(requests) for d in DOMAINS]
            for i, level in enumerate(levels)}


def block(client: httpx.Client, url: str, items: list, level: int, tokens: int, tag: str) -> tuple[list, float]:
    """``items`` through ``url``, ``level`` at once: (per-request rows, wall seconds of the block)."""
    started = time.perf_counter()
    with ThreadPoolExecutor(level) as pool:
        rows = list(pool.map(lambda pair: {"domain": pair[1][0], **ask(client, url, pair[1][0], pair[1][1].messages,
                                                                        tokens, f"{tag}-{pair[0]}")},
                             enumerate(items)))
    return rows, time.perf_counter() - started


def run(urls: dict[str, str], plan: dict[int, list], tokens: int) -> dict:
    log: dict = {}
    began = time.monotonic()
    with httpx.Client(timeout=600, limits=httpx.Limits(max_connections=64)) as client:
        for level, stream in plan.items():
            size = 4 * level
            blocks = [stream[i:i + size] for i in range(0, len(stream), size)]
            names = list(urls)
            entry = log[str(level)] = {n: {"rows": [], "wall": 0.0} for n in names}
            for b, items in enumerate(blocks):
                for j in range(len(names)):
                    name = names[(b + j) % len(names)]
                    rows, wall = block(client, urls[name], items, level, tokens, f"{level}-{b}-{name}")
                    entry[name]["rows"] += rows
                    entry[name]["wall"] += wall
                console.print(f"\rlevel {level}: block {b + 1}/{len(blocks)}, {time.monotonic() - began:.0f} s",
                              end="")
            console.print()
    return log


def summary(log: dict) -> dict:
    out = {}
    for level, by in log.items():
        row = {}
        for name, got in by.items():
            rows = got["rows"]
            per = {d: sum(r["n"] for r in rows if r["domain"] == d) / sum(r["wall"] for r in rows if r["domain"] == d)
                   for d in DOMAINS}
            pools: dict[str, int] = {}
            for r in rows:
                pools[r["pool"] or name] = pools.get(r["pool"] or name, 0) + 1
            drafted, accepted = sum(r["drafted"] for r in rows), sum(r["accepted"] for r in rows)
            row[name] = {"throughput": sum(r["n"] for r in rows) / got["wall"], **per, "pools": pools,
                         "acceptance": accepted / drafted if drafted else None}
        fixed = [n for n in row if n != PROXY]
        best = {d: max(fixed, key=lambda n: row[n][d]) for d in DOMAINS}
        schedule = max(fixed, key=lambda n: row[n]["throughput"])
        out[level] = {"by": row, "best": best, "schedule": schedule}
        if PROXY in row:
            p = row[PROXY]
            out[level].update(proxy_vs_best={d: p[d] / row[best[d]][d] for d in DOMAINS},
                              proxy_vs_schedule=p["throughput"] / row[schedule]["throughput"])
    return out


def stored_by_load(db: str) -> list[dict]:
    """The proxy's stored requests per (domain, lookahead, load band), as `specwatch stats --by load` reads."""
    try:
        from storage import Store
        from storage.query import StatsQuery

        store = Store.open(db)
        try:
            return store.stats(StatsQuery(until=time.time() + 60, by=("domain", "lookahead", "load"))).rows
        finally:
            store.close()
    except Exception as exc:  # noqa: BLE001 - a store without load bands: the run's figures still stand
        return [{"error": str(exc)}]


def report(out: dict) -> None:
    pools = [n for n in out["pools"]]
    t = Table(title=f"{out['model']} F16, tokens/s ({out['requests']} requests a domain and level, "
                    f"{out['tokens']} tokens, {out['slots']} slots x {out['threads']} threads a server)")
    for col in ["in flight", "domain", *pools, PROXY, "best fixed", "proxy/best", "proxy pools"]:
        t.add_column(col)
    for level, s in out["summary"].items():
        by = s["by"]
        for d in (*DOMAINS, "throughput"):
            cells = [f"{by[n][d]:.1f}" if n in by else "-" for n in (*pools, PROXY)]
            share = s.get("proxy_vs_schedule" if d == "throughput" else "proxy_vs_best")
            share = share if share is None or d == "throughput" else share[d]
            best = s["schedule"] if d == "throughput" else s["best"][d]
            mix = ", ".join(f"{k} {v}" for k, v in sorted(by[PROXY]["pools"].items())) \
                if d == "throughput" and PROXY in by else ""
            t.add_row(level, "all (throughput)" if d == "throughput" else d, *cells, best,
                      "-" if share is None else f"{share:.1%}", mix)
    console.print(t)


def markdown(out: dict) -> str:
    pools = list(out["pools"])
    lines = ["| in flight | domain | " + " | ".join(pools) + " | proxy | best fixed | proxy/best | proxy's pools |",
             "|" + "---|" * (len(pools) + 6)]
    for level, s in out["summary"].items():
        by = s["by"]
        for d in (*DOMAINS, "throughput"):
            cells = " | ".join(f"{by[n][d]:.1f}" if n in by else "-" for n in (*pools, PROXY))
            share = s.get("proxy_vs_schedule" if d == "throughput" else "proxy_vs_best")
            share = "-" if share is None else f"**{(share if d == 'throughput' else share[d]):.1%}**"
            mix = ", ".join(f"{k} {v}" for k, v in sorted(by[PROXY]["pools"].items())) \
                if d == "throughput" and PROXY in by else ""
            best = s["schedule"] if d == "throughput" else s["best"][d]
            lines.append(f"| {level} | {'all (throughput)' if d == 'throughput' else d} | {cells} | {best} | "
                         f"{share} | {mix} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="example: python bench/load_aware.py --levels 1,4,8 --requests 48")
    parser.add_argument("--levels", default="1,4,8", help="requests in flight at the client, in order")
    parser.add_argument("--requests", type=int, default=24, help="per domain and level (default 24)")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--pools", default="off,k24", help=f"fixed pools, of {', '.join(LOOKAHEAD)} (default off,k24)")
    parser.add_argument("--slots", type=int, default=8, help="slots (-np) of every server")
    parser.add_argument("--threads", type=int, default=1, help="threads (-t) of every server (default 1)")
    parser.add_argument("--cores", default="0",
                        help="CPUs every server is pinned to (taskset list, default 0; '' for none)")
    parser.add_argument("--default-pool", default="k24", help="the proxy's --default-pool ('' for none)")
    parser.add_argument("--no-proxy", action="store_true", help="the fixed pools alone (the engines' table)")
    parser.add_argument("--show", action="store_true", help="print the last run's table and exit")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.show:
        out = json.loads(args.out.read_text())
        report(out)
        print(markdown(out))
        return
    pools = args.pools.split(",")
    unknown = [p for p in pools if p not in LOOKAHEAD]
    if unknown:
        raise SystemExit(f"--pools: unknown pool {unknown[0]!r} (known: {', '.join(LOOKAHEAD)})")
    levels = [int(x) for x in args.levels.split(",")]
    plan = streams(levels, args.requests)
    model = Prepared.read("smollm2-135m")
    target = f16_target(model)
    work = Path(tempfile.mkdtemp(prefix="bench-load-"))
    fixed = {n: LlamaServer(config(target, n, args.slots, args.threads), log_path=work / f"{n}.log") for n in pools}
    behind = {} if args.no_proxy else {
        n: LlamaServer(config(target, n, args.slots, args.threads), log_path=work / f"proxy-{n}.log") for n in pools}
    db = f"sqlite:///{work / 'proxy.db'}"
    out = {"model": model.name, "target": target.name, "requests": args.requests, "tokens": args.tokens,
           "slots": args.slots, "threads": args.threads, "cores": args.cores, "levels": levels,
           "pools": {n: {"speculation": "ngram-mod" if LOOKAHEAD[n] else "none", "lookahead": LOOKAHEAD[n]}
                     for n in pools},
           "default_pool": args.default_pool or None, "machine": platform.processor() or platform.machine(),
           "cpus": os.cpu_count(), "load_before": os.getloadavg()}
    proxy = None
    began = time.monotonic()
    try:
        for s in (*fixed.values(), *behind.values()):
            s.start()
            if args.cores:  # every thread of the server, those it made already included
                subprocess.run(["taskset", "-a", "-c", "-p", args.cores, str(s.pid)], check=True,
                               capture_output=True)
        port = free_port()
        urls = {n: s.base_url for n, s in fixed.items()}
        if behind:
            # the proxy's pools share the machine (one core): the load of a request is that of all of them
            extra = ("--shared-load",) + (("--default-pool", args.default_pool) if args.default_pool else ())
            proxy = start_proxy({n: s.base_url for n, s in behind.items()}, port, db, work / "proxy.log",
                                health_seconds=2.0, extra=extra)
            urls[PROXY] = f"http://127.0.0.1:{port}"
        log = run(urls, plan, args.tokens)
    finally:
        if proxy is not None:
            proxy.terminate()
            proxy.wait(60)
        for s in (*fixed.values(), *behind.values()):
            s.stop()
    out["seconds"] = round(time.monotonic() - began, 1)
    out["load_after"] = os.getloadavg()
    out["summary"] = summary(log)
    out["stored_by_load"] = stored_by_load(db) if behind else []
    out["log"] = log
    report(out)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(markdown(out))


if __name__ == "__main__":
    main()
