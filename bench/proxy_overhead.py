"""Benchmark: what `specwatch proxy` adds to a request, on its own.

Two upstreams, each with a `specwatch proxy` (a process of its own, one pool, defaults but the health
interval) in front: a real llama-server on the tiny kit's target (one thread, no draft) and
bench/fast_upstream.py, a plain-asyncio stand-in that answers a fixed llama.cpp-shaped completion at once,
so the proxy's own cost shows without the engine's variance. Per upstream and repetition, with
``paired()`` of bench/engine_llamacpp.py (the same request direct and through the proxy, order alternating):
the added latency of a non-streamed completion (max_tokens 1) and the time to the first streamed byte added
(max_tokens 4), plus the proxy process's CPU time per request of each kind. ``--compare NAME=DIR`` (repeat)
adds a proxy run from another checkout (e.g. the main branch) in front of the same upstreams, measured in
the same rounds, for before/after figures under the same load. Goals: overhead p50 <= 1 ms, p99 <= 5 ms; first byte
added p50 <= 1 ms. Not a test: prints a table and writes bench/results/proxy_overhead.json.

    python bench/proxy_overhead.py [--reps 3] [--pairs 400] [--compare NAME=/path/to/other/checkout]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent.engines.llamacpp import LlamaServer, LlamaServerConfig, free_port  # noqa: E402
from bench.engine_llamacpp import gguf_files, healthy, paired, start_proxy  # noqa: E402
from bench.sidecar_process import cpu_seconds  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "proxy_overhead.json"
HEALTH_SECONDS = 2.0  # the CLI's default


def start_fast(port: int, log: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, str(REPO / "bench" / "fast_upstream.py"), str(port)],
                            stdout=open(log, "wb"), stderr=subprocess.STDOUT)
    return healthy(proc, f"http://127.0.0.1:{port}", log, timeout=30.0)


def measure(client: httpx.Client, direct: str, proxied: str, pid: int, pairs: int) -> dict:
    """Paired overhead (non-streamed) and first byte added (streamed), and the proxy's CPU per request."""
    cpu = cpu_seconds(pid)
    overhead = paired(client, direct, proxied, pairs, stream=False)
    overhead["proxy_cpu_ms_per_request"] = (cpu_seconds(pid) - cpu) * 1000 / pairs
    cpu = cpu_seconds(pid)
    first = paired(client, direct, proxied, pairs // 2, stream=True)
    first["proxy_cpu_ms_per_request"] = (cpu_seconds(pid) - cpu) * 1000 / (pairs // 2)
    return {"overhead": overhead, "first_byte": first}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3, help="repetitions, the upstreams interleaved")
    parser.add_argument("--pairs", type=int, default=400, help="non-streamed pairs per repetition (streamed: half)")
    parser.add_argument("--compare", action="append", default=[], metavar="NAME=DIR",
                        help="another checkout whose proxy to measure too (repeat)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    files = gguf_files("tiny")
    work = Path(tempfile.mkdtemp(prefix="bench-proxy-"))
    checkouts = {"this": REPO}
    for text in args.compare:
        name, _, path = text.partition("=")
        checkouts[name] = Path(path).resolve()
    out = {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
           "load_average": os.getloadavg(), "pairs": args.pairs, "reps": args.reps,
           "checkouts": {name: {"path": str(path), "commit": _commit(path)} for name, path in checkouts.items()},
           "runs": []}
    llama = LlamaServer(LlamaServerConfig(model=files["target-v1"], ctx_size=512, threads=1),
                        log_path=work / "llama.log").start()
    fast_port = free_port()
    fast = start_fast(fast_port, work / "fast.log")
    upstreams = {"llama-server": llama.base_url, "fast": f"http://127.0.0.1:{fast_port}"}
    proxies: dict[tuple[str, str], tuple[subprocess.Popen, str]] = {}
    client = httpx.Client(timeout=60)
    try:
        for checkout, path in checkouts.items():
            for up, url in upstreams.items():
                port = free_port()
                proc = start_proxy({"off": url}, port, f"sqlite:///{work / f'{checkout}-{up}.db'}",
                                   work / f"proxy-{checkout}-{up}.log", HEALTH_SECONDS, repo=path)
                proxies[(checkout, up)] = (proc, f"http://127.0.0.1:{port}")
        for (_, up), (_, url) in proxies.items():  # warm up: connections, caches
            paired(client, upstreams[up], url, 20, stream=False)
            paired(client, upstreams[up], url, 10, stream=True)
        for rep in range(args.reps):
            order = list(proxies.items())
            if rep % 2:
                order.reverse()
            for (checkout, up), (proc, url) in order:
                result = measure(client, upstreams[up], url, proc.pid, args.pairs)
                out["runs"].append({"rep": rep, "checkout": checkout, "upstream": up, **result,
                                    "load_average": os.getloadavg()})
                print(f"rep {rep} {checkout:8} {up:13} overhead p50 {result['overhead']['p50_ms']:.2f} ms, "
                      f"first byte p50 {result['first_byte']['p50_ms']:.2f} ms", flush=True)
    finally:
        client.close()
        for proc, _ in proxies.values():
            proc.terminate()
            proc.wait(30)
        fast.terminate()
        fast.wait(10)
        llama.stop()
    out["summary"] = summarise(out["runs"])
    report(out)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")


def _commit(path: Path) -> str | None:
    found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=path, capture_output=True, text=True)
    return found.stdout.strip() or None


def summarise(runs: list[dict]) -> dict:
    """Per checkout, upstream and kind: the median over repetitions of each figure (and the worst p99)."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for run in runs:
        groups.setdefault((run["checkout"], run["upstream"]), []).append(run)
    summary = {}
    for (checkout, up), group in groups.items():
        for kind in ("overhead", "first_byte"):
            figures = [g[kind] for g in group]
            summary[f"{checkout}/{up}/{kind}"] = {
                "p50_ms": statistics.median(f["p50_ms"] for f in figures),
                "p99_ms": statistics.median(f["p99_ms"] for f in figures),
                "worst_p99_ms": max(f["p99_ms"] for f in figures),
                "max_ms": max(f["max_ms"] for f in figures),
                "direct_p50_ms": statistics.median(f["direct_p50_ms"] for f in figures),
                "proxy_cpu_ms_per_request": statistics.median(f["proxy_cpu_ms_per_request"] for f in figures),
                "p50_ms_per_rep": [round(f["p50_ms"], 3) for f in figures]}
    return summary


def report(out: dict) -> None:
    table = Table(title=f"proxy overhead, paired with direct ({out['pairs']} pairs non-streamed, "
                        f"{out['pairs'] // 2} streamed, x{out['reps']}; medians over repetitions)")
    for col in ("checkout", "upstream", "measure", "added p50 ms", "added p99 ms", "worst p99 ms", "max ms",
                "direct p50 ms", "proxy CPU ms/req", "p50 per rep"):
        table.add_column(col, justify="left" if col in ("checkout", "upstream", "measure") else "right")
    for key, s in out["summary"].items():
        checkout, up, kind = key.split("/")
        commit = out["checkouts"][checkout]["commit"]
        table.add_row(f"{checkout} ({commit})", up, "latency" if kind == "overhead" else "first byte",
                      f"{s['p50_ms']:.2f}", f"{s['p99_ms']:.2f}", f"{s['worst_p99_ms']:.2f}", f"{s['max_ms']:.1f}",
                      f"{s['direct_p50_ms']:.2f}", f"{s['proxy_cpu_ms_per_request']:.2f}",
                      " ".join(f"{v:.2f}" for v in s["p50_ms_per_rep"]))
    Console(width=200).print(table)
    print(f"load average at start {out['load_average']}, {out['cpus']} CPUs")


if __name__ == "__main__":
    main()
