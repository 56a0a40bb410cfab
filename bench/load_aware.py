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
tokens over its wall time, summed over the domain's requests); each process's CPU over the blocks (servers and
proxy), and how far apart its two servers' in-flight counts ran (time mean of the difference, from each
request's server and times, kept in the log). Goals (issue: decisions that know the load):
the proxy >= 95% of the best fixed pool per domain at every level, and >= the engine-style schedule (the
best fixed pool per level over both domains, chosen offline) in throughput on the mixed stream.

Two layouts, each giving every configuration the same compute:

- ``--layout replicas`` (default), pools as they are deployed, a machine each: every configuration is two
  servers of one thread, one pinned to each core. A fixed pool is two replicas of it behind a balancer (the
  client sends each request to the one with fewer in flight); the proxy routes between one ``off`` and one
  ``k24`` server (the first two of --pools), each on a core of its own. Every block, a configuration's two
  servers trade cores (``--no-swap`` keeps them): one core of a 2-core machine is slower for a server than the
  other, and the proxy's two servers differ, so without the swap its domains' figures would depend on which
  domain the routing sends to which core.
- ``--layout shared``: every server one thread pinned to the same core (--cores, default 0), the proxy's
  pools too (``--shared-load``): a configuration computes on one core whether it uses one pool or splits a
  level between two, which then take turns on it (the client and the proxy run on the other core).

Servers of several threads sharing cores wait on each other at every synchronisation of a step: three
2-thread servers on 2 cores, 4 requests in flight split between them, ran 0.5-1 token per second against
70 for one server alone, hence one thread a server. Not a test: prints a table and writes
bench/results/load_aware.json (``shared``: load_aware_shared.json).

    python bench/load_aware.py [--layout replicas|shared] [--levels 1,4,8] [--requests 48] [--tokens 64]
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
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.engines.llamacpp import LlamaServer, LlamaServerConfig, free_port  # noqa: E402
from agent.pretrained.f16 import f16_target  # noqa: E402
from agent.pretrained.prepare import Prepared  # noqa: E402
from agent.pretrained.prompts import prompts as prompt_set  # noqa: E402
from bench.engine_llamacpp import start_proxy  # noqa: E402
from bench.load_report import DOMAINS, MIX, PROXY, core_table, markdown, report, server_table, summary  # noqa: E402
from bench.real_model import ask  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "load_aware.json"
SHARED_RESULTS = Path(__file__).parent / "results" / "load_aware_shared.json"
LOOKAHEAD = {"off": 0, "k8": 8, "k24": 24}
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


ORIGIN = time.perf_counter()  # rows' start and end are seconds since this


class Balancer:
    """A configuration's servers: each request to the one with the fewest in flight (replicas behind a
    balancer; one server: always it)."""

    def __init__(self, urls: list[str]):
        self.urls, self.busy, self.lock = urls, [0] * len(urls), threading.Lock()

    @contextmanager
    def pick(self):
        with self.lock:
            i = min(range(len(self.urls)), key=lambda j: (self.busy[j], j))
            self.busy[i] += 1
        try:
            yield self.urls[i]
        finally:
            with self.lock:
                self.busy[i] -= 1


def block(client: httpx.Client, servers: Balancer, items: list, level: int, tokens: int,
          tag: str) -> tuple[list, float]:
    """``items`` through ``servers``, ``level`` at once: (per-request rows, wall seconds of the block)."""
    def one(pair):
        i, (domain, prompt) = pair
        with servers.pick() as url:
            start = time.perf_counter() - ORIGIN
            row = ask(client, url, domain, prompt.messages, tokens, f"{tag}-{i}")
            # the server that decoded it (the proxy's pool, or the replica), and when: the balance over time
            return {"domain": domain, **row, "server": row["pool"] or str(servers.urls.index(url)),
                    "start": round(start, 4), "end": round(time.perf_counter() - ORIGIN, 4)}

    started = time.perf_counter()
    with ThreadPoolExecutor(level) as pool:
        rows = list(pool.map(one, enumerate(items)))
    return rows, time.perf_counter() - started


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pin_to(pid: int, cpus: str) -> None:
    """Every thread of process ``pid``, those it made already included, on ``cpus`` (a taskset list)."""
    subprocess.run(["taskset", "-a", "-c", "-p", cpus, str(pid)], check=True, capture_output=True)


def run(urls: dict[str, list[str]], plan: dict[int, list], tokens: int,
        pids: dict[str, dict[str, int]] | None = None, swap: dict[str, dict[str, int]] | None = None,
        cores: list[str] = ()) -> dict:
    """Per level and configuration: the rows and wall seconds of its blocks; with ``pids`` (per configuration,
    its processes by label: servers, the proxy), each process's CPU seconds over the configuration's blocks
    (``cpu``: a server given less than its core, or the proxy's own share of the servers' cores).

    ``swap`` (per configuration, its two servers' pids by label): before each block of the configuration its
    servers go to ``cores`` in turn, server i to cores[(i + block) % 2], so each sees either core in half its
    blocks, a row's ``core`` saying where it ran (in runs without it a server on one core decoded 5-15% slower
    than on the other, and which domain the proxy routed to which core moved a domain's figure by as much)."""
    log: dict = {}
    pids, swap = pids or {}, swap or {}
    began = time.monotonic()
    with httpx.Client(timeout=600, limits=httpx.Limits(max_connections=64)) as client:
        for level, stream in plan.items():
            size = 4 * level
            blocks = [stream[i:i + size] for i in range(0, len(stream), size)]
            names = list(urls)
            balancers = {n: Balancer(u) for n, u in urls.items()}
            entry = log[str(level)] = {n: {"rows": [], "wall": 0.0, "cpu": {}} for n in names}
            for b, items in enumerate(blocks):
                for j in range(len(names)):
                    name = names[(b + j) % len(names)]
                    on = {label: cores[(i + b) % 2] for i, label in enumerate(swap.get(name, {}))}
                    for label, core in on.items():
                        pin_to(swap[name][label], core)
                    before = {label: cpu_seconds(pid) for label, pid in pids.get(name, {}).items()}
                    rows, wall = block(client, balancers[name], items, level, tokens, f"{level}-{b}-{name}")
                    entry[name]["rows"] += [{**r, "block": b, **({"core": on[r["server"]]} if on else {})}
                                            for r in rows]
                    entry[name]["wall"] += wall
                    cpu = entry[name]["cpu"]
                    for label, pid in pids.get(name, {}).items():
                        cpu[label] = cpu.get(label, 0.0) + cpu_seconds(pid) - before[label]
                console.print(f"\rlevel {level}: block {b + 1}/{len(blocks)}, {time.monotonic() - began:.0f} s",
                              end="")
            console.print()
    return log


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
    parser.add_argument("--layout", choices=("replicas", "shared"), default="replicas",
                        help="replicas: every configuration two servers, one a core (default); shared: one "
                             "server a pool, all on --cores")
    parser.add_argument("--cores", default=None,
                        help="CPUs: replicas, one server on each (default 0,1); shared, every server on all of "
                             "them (default 0; '' for no pinning)")
    parser.add_argument("--default-pool", default="k24", help="the proxy's --default-pool ('' for none)")
    parser.add_argument("--health-seconds", type=float, default=2.0,
                        help="the proxy's pool checks, seconds apart (default 2)")
    parser.add_argument("--mix", action="store_true",
                        help="replicas: also servers like the proxy's (off and k24, a core each) behind the "
                             "client's balancer, to tell the proxy's path from its pair of pools")
    parser.add_argument("--no-swap", action="store_true",
                        help="replicas: keep each server on its core (default: a configuration's two servers "
                             "change cores every block)")
    parser.add_argument("--no-proxy", action="store_true", help="the fixed pools alone (the engines' table)")
    parser.add_argument("--show", action="store_true", help="print the last run's table and exit")
    parser.add_argument("--out", type=Path, default=None, help="default bench/results/load_aware.json "
                                                                 "(shared: load_aware_shared.json)")
    args = parser.parse_args()
    shared = args.layout == "shared"
    args.out = args.out or (SHARED_RESULTS if shared else RESULTS)
    args.cores = args.cores if args.cores is not None else ("0" if shared else "0,1")
    if args.show:
        out = json.loads(args.out.read_text())
        report(out)
        print(markdown(out))
        print(core_table(out))
        print(server_table(out))
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
    cores = [c for c in args.cores.split(",") if c]
    if not shared and len(cores) < 2:
        raise SystemExit("--layout replicas: --cores needs two CPUs (one a server)")
    # the CPUs each of two servers is pinned to (taskset list): replicas, a core each; shared, all of --cores
    pins: list[str | None] = [args.cores or None] * 2 if shared else cores[:2]

    def server(n: str, tag: str, pin: str | None) -> tuple[LlamaServer, str | None]:
        return LlamaServer(config(target, n, args.slots, args.threads), log_path=work / f"{tag}.log"), pin

    replicas = 1 if shared else 2
    fixed = {n: [server(n, f"{n}-{i}", pins[i]) for i in range(replicas)] for n in pools}
    # the proxy's pools: shared, one a pool on the shared cores; replicas, off and k24 on a core each
    behind = {} if args.no_proxy else {n: server(n, f"proxy-{n}", pins[i % 2]) for i, n in
                                       enumerate(pools if shared else pools[:2])}
    # --mix: the proxy's pair of pools without the proxy (the client's balancer in front)
    mix = [server(n, f"mix-{n}", pins[i]) for i, n in enumerate(pools[:2])] if args.mix and not shared else []
    db = f"sqlite:///{work / 'proxy.db'}"
    out = {"model": model.name, "target": target.name, "requests": args.requests, "tokens": args.tokens,
           "layout": args.layout, "replicas": replicas,
           "slots": args.slots, "threads": args.threads, "cores": args.cores, "levels": levels,
           "pools": {n: {"speculation": "ngram-mod" if LOOKAHEAD[n] else "none", "lookahead": LOOKAHEAD[n]}
                     for n in pools},
           "default_pool": args.default_pool or None, "machine": platform.processor() or platform.machine(),
           "cpus": os.cpu_count(), "load_before": os.getloadavg()}
    proxy = None
    everything = [*(s for group in fixed.values() for s in group), *behind.values(), *mix]
    began = time.monotonic()
    try:
        for s, pin in everything:
            s.start()
            if pin:
                pin_to(s.pid, pin)
        port = free_port()
        urls = {n: [s.base_url for s, _ in group] for n, group in fixed.items()}
        pids = {n: {str(i): s.pid for i, (s, _) in enumerate(group)} for n, group in fixed.items()}
        if mix:
            urls[MIX], pids[MIX] = [s.base_url for s, _ in mix], {str(i): s.pid for i, (s, _) in enumerate(mix)}
        if behind:
            # shared: the proxy's pools share the machine, so the load of a request is that of all of them
            extra = (("--shared-load",) if shared else ()) + \
                (("--default-pool", args.default_pool) if args.default_pool else ())
            proxy = start_proxy({n: s.base_url for n, (s, _) in behind.items()}, port, db, work / "proxy.log",
                                health_seconds=args.health_seconds, extra=extra)
            urls[PROXY] = [f"http://127.0.0.1:{port}"]
            pids[PROXY] = {PROXY: proxy.pid, **{n: s.pid for n, (s, _) in behind.items()}}
        # replicas: each configuration's two servers trade cores every block (the proxy's off and k24 too)
        swap = {} if shared or args.no_swap else {
            n: {label: p for label, p in by.items() if label != PROXY} for n, by in pids.items()}
        out["swap"] = bool(swap)
        log = run(urls, plan, args.tokens, pids, swap, cores[:2])
    finally:
        if proxy is not None:
            proxy.terminate()
            proxy.wait(60)
        for s, _ in everything:
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
    print(core_table(out))
    print(server_table(out))


if __name__ == "__main__":
    main()
