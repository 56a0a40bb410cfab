"""Benchmark: the proxy steering real llama.cpp servers (build b11434) on the model kit's domains.

Pools of llama-server, each on one thread (-t 1: the machine has 2 shared cores; requests run one at a
time, so one server computes at a time): (a) target + draft at llama.cpp's default draft settings (no
--spec-draft-n-max / -p-min given), (b) fixed pools off, k2, k3, k4, k8 (--spec-draft-n-max K,
--spec-draft-p-min 0), (c) `specwatch proxy` (a separate process, its default policy or --policy) in front
of the fixed pools. Phase v1 serves target v1 with its distilled draft; phase v2 restarts every server with
target v2 behind the same ports, the draft now stale, the proxy keeping what it learnt. Per domain and
phase: tokens/s (generated tokens over request wall time, client side, greedy, prompt cache off) of each;
configurations interleaved request by request so background load hits them alike. Then the proxy's own
cost: the same small request direct and through the proxy (paired), and the time to the first streamed
byte. Goals: (c) >= 95% of the best fixed pool per domain and phase and >= (a) everywhere; the stale
domain on the plain pool within 50 requests; overhead p50 <= 1 ms, p99 <= 5 ms; first byte p50 <= 1 ms.
Not a test: prints a table and writes bench/results/engine_llamacpp.json.

    python bench/engine_llamacpp.py [--size full] [--quick] [--rounds 48] [--tokens 64] [--policy pool-model+switch]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.engines.llamacpp import LlamaServer, LlamaServerConfig, free_port  # noqa: E402
from agent.kit import layout  # noqa: E402
from agent.kit.gguf import export_kit, gguf_name  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "engine_llamacpp.json"
# llama.cpp's default draft length is 3 (b11434: --spec-draft-n-max 3, --spec-draft-p-min 0), so k3 is
# the default's own K: without it the proxy could only match the default by luck where K = 3 is best.
FIXED = {"off": 0, "k2": 2, "k3": 3, "k4": 4, "k8": 8}
DEFAULT = "default"
PROXY = "proxy"
PROMPT_BYTES = {"tiny": 100, "full": 200}  # prompt + tokens within the kit's context (160 / 320 positions)


def gguf_files(size: str) -> dict[str, Path]:
    """The kit's GGUF files, exported on first use."""
    root = layout.kit_dir(size)
    versions = layout.read_manifest(root)["versions"]
    paths = {m: root / "gguf" / gguf_name(m, versions[m]) for m in ("target-v1", "draft", "target-v2")}
    missing = [m for m, p in paths.items() if not p.exists()]
    if missing:
        export_kit(size, models=missing)
    return paths


def start(configs: dict[str, LlamaServerConfig], logs: Path) -> dict[str, LlamaServer]:
    return {name: LlamaServer(c, log_path=logs / f"{name}.log").start() for name, c in configs.items()}


def configs(files: dict[str, Path], target: str, ports: dict[str, int]) -> dict[str, LlamaServerConfig]:
    common = dict(ctx_size=512, threads=1, metrics=True)
    out = {DEFAULT: LlamaServerConfig(model=files[target], port=ports[DEFAULT], extra_args=(
        "-md", str(files["draft"]), "--spec-type", "draft-simple"), **common)}
    for name, k in FIXED.items():
        extra = {"draft": files["draft"], "lookahead": k} if k else {}
        out[name] = LlamaServerConfig(model=files[target], port=ports[name], **extra, **common)
    return out


def start_proxy(upstreams: dict[str, str], port: int, db: str, log: Path, health_seconds: float = 0.5,
                repo: Path = Path(__file__).resolve().parents[1], policy: str | None = None,
                admin_port: int | None = None, extra: tuple[str, ...] = ()) -> subprocess.Popen:
    """`specwatch proxy` as a process of its own in front of ``upstreams`` (pool name: URL), run from the
    checkout ``repo`` (default this one), with ``policy`` (default: the proxy's), its admin listener on
    ``admin_port`` (default: a free port; proxies run side by side) and ``extra`` options; returns once its
    /health answers 200."""
    ups = [a for name, url in upstreams.items() for a in ("--upstream", f"{name}={url}")]
    ups += ["--policy", policy] if policy else []
    ups += list(extra)
    if "admin_port" in (repo / "agent" / "cli" / "proxy.py").read_text():  # a checkout from before has none
        ups += ["--admin-port", str(admin_port or free_port())]
    proc = subprocess.Popen([sys.executable, "-c", "from agent.cli import main; main()", "proxy", *ups,
                             "--db", db, "--port", str(port), "--health-seconds", str(health_seconds)],
                            cwd=repo, stdout=open(log, "wb"),
                            stderr=subprocess.STDOUT, env={**os.environ, "SPECWATCH_POD": "bench"})
    return healthy(proc, f"http://127.0.0.1:{port}", log)


def healthy(proc: subprocess.Popen, url: str, log: Path, timeout: float = 120.0) -> subprocess.Popen:
    """``proc`` once ``url``/health answers 200; killed (RuntimeError naming ``log``) if it does not in time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(url + "/health").status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{proc.args[:4]} did not start; see {log}")


def request(client: httpx.Client, url: str, domain: str, prompt: str, tokens: int) -> tuple[int, float, str]:
    """(generated tokens, wall seconds, pool that served) of one greedy completion."""
    body = {"prompt": prompt, "max_tokens": tokens, "temperature": 0.0, "cache_prompt": False}
    started = time.perf_counter()
    answer = client.post(url + "/v1/completions", json=body, headers={"X-Specwatch-Domain": domain})
    wall = time.perf_counter() - started
    answer.raise_for_status()
    return answer.json()["timings"]["predicted_n"], wall, answer.headers.get("x-specwatch-pool", "")


def phase(client, urls: dict[str, str], prompts: dict[str, list[str]], rounds: int, tokens: int) -> dict:
    """Interleaved requests: per round, per domain, one request to every configuration."""
    sums = {d: {c: [0, 0.0] for c in urls} for d in prompts}
    served: dict[str, list[str]] = {d: [] for d in prompts}
    for r in range(rounds):
        for domain, texts in prompts.items():
            prompt = texts[r % len(texts)]
            for name, url in urls.items():
                n, wall, pool = request(client, url, domain, prompt, tokens)
                sums[domain][name][0] += n
                sums[domain][name][1] += wall
                if name == PROXY:
                    served[domain].append(pool)
    rates = {d: {c: n / s for c, (n, s) in by.items()} for d, by in sums.items()}
    return {"tokens_per_second": rates, "proxy_pools": served}


def moved_after(pools: list[str], target: str = "off", window: int = 10, share: float = 0.8) -> int | None:
    """Requests until the proxy serves ``target`` on at least ``share`` of the next ``window`` requests."""
    for i in range(len(pools) - window + 1):
        if pools[i:i + window].count(target) >= share * window:
            return i
    return None


def paired(client, direct: str | dict[str, str], proxied: str, n: int, stream: bool) -> dict:
    """Per pair, the proxy's latency (or time to first byte) minus the direct one to the same pool, in ms.

    ``direct`` is one URL, or the pools' URLs by name: then the direct call goes to the pool the proxy
    served the pair from (its ``x-specwatch-pool``), so the difference is the proxy's alone and not that of
    a pool with a draft (which also reads the prompt with the draft) against one without. When the direct
    call goes first it takes the pool the proxy chose last; a pair where the proxy then chose another pool
    is measured again (``other_pool`` counts them). A pair in which a kept-alive connection turned out
    closed is measured again too (llama-server closes a connection after 100 requests, after a streamed
    answer without saying so); ``repeated`` counts them by the side that failed. This process's garbage
    collector is off meanwhile: a full collection of its heap (torch and the kit's modules, ~200k objects)
    takes ~100 ms and would land in the tails as if the proxy or the engine had stalled."""
    urls = direct if isinstance(direct, dict) else None
    body = {"prompt": "a", "max_tokens": 4 if stream else 1, "temperature": 0.0, "stream": stream}
    diffs, direct_ms, repeated = [], [], {"direct": 0, "proxied": 0}
    other, last, served = 0, (next(iter(urls)) if urls else None), {}
    collecting = gc.isenabled()
    gc.disable()
    try:
        for i in range(n):
            for attempt in range(6):
                try:
                    times, pool = _pair(client, urls or direct, proxied, body, stream, i % 2, last)
                except httpx.RemoteProtocolError as exc:
                    if attempt == 5:
                        raise
                    repeated["direct" if exc.args[-1] == "d" else "proxied"] += 1
                    continue
                if urls is None or pool == times["pool"]:
                    break
                other, last = other + 1, times["pool"]
            else:
                raise RuntimeError("the proxy kept choosing another pool than the direct call's")
            if urls is not None:
                last = times["pool"]
                served[last] = served.get(last, 0) + 1
            diffs.append((times["p"] - times["d"]) * 1000)
            direct_ms.append(times["d"] * 1000)
    finally:
        if collecting:
            gc.enable()
    diffs.sort()
    out = {"p50_ms": statistics.median(diffs), "p99_ms": diffs[min(len(diffs) - 1, int(0.99 * len(diffs)))],
           "max_ms": diffs[-1], "direct_p50_ms": statistics.median(direct_ms), "pairs": n, "repeated": repeated}
    if urls is not None:
        out["pools"], out["other_pool"] = served, other
    return out


def _pair(client, direct: str | dict[str, str], proxied: str, body: dict, stream: bool, direct_first: bool,
          last: str | None) -> tuple[dict, str | None]:
    """Times of one pair by side ("d", "p"), the pool the proxy served from (``times["pool"]``), and the
    pool the direct call went to (None for a single direct URL)."""
    times: dict = {}
    pool = last
    for name in (("d", "p") if direct_first else ("p", "d")):
        if name == "p":
            url = proxied
        elif isinstance(direct, dict):
            pool = times.get("pool", last)
            url = direct[pool]
        else:
            url = direct
        started = time.perf_counter()
        try:
            with client.stream("POST", url + "/v1/completions", json=body) as answer:
                if stream:
                    chunks = answer.iter_raw()
                    next(chunks)
                    times[name] = time.perf_counter() - started
                    for _ in chunks:  # the rest of the stream, not timed
                        pass
                else:
                    answer.read()
                    times[name] = time.perf_counter() - started
                if name == "p":
                    times["pool"] = answer.headers.get("x-specwatch-pool")
        except httpx.RemoteProtocolError as exc:
            exc.args += (name,)
            raise
    return times, (pool if isinstance(direct, dict) else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="full", choices=("tiny", "full"))
    parser.add_argument("--quick", action="store_true", help="6 rounds, 32 tokens, 100 overhead pairs")
    parser.add_argument("--rounds", type=int, default=48, help="requests per domain per configuration and phase")
    parser.add_argument("--tokens", type=int, default=None, help="per request; default 64 (full), 48 (tiny)")
    parser.add_argument("--pairs", type=int, default=400)
    parser.add_argument("--policy", default=None, help="the proxy's policy (default: the proxy's own default)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.tokens, args.pairs = 6, args.tokens or 32, 100
    args.tokens = args.tokens or (64 if args.size == "full" else 48)
    files = gguf_files(args.size)
    prompts = {d: [t[:PROMPT_BYTES[args.size]] for t in texts[:16]]
               for d, texts in layout.load_prompts(layout.kit_dir(args.size)).items()}
    work = Path(tempfile.mkdtemp(prefix="bench-llamacpp-"))
    ports = {name: free_port() for name in (DEFAULT, *FIXED)}
    proxy_port, admin_port = free_port(), free_port()
    urls = {name: f"http://127.0.0.1:{p}" for name, p in ports.items()}
    urls[PROXY] = f"http://127.0.0.1:{proxy_port}"
    out = {"size": args.size, "rounds": args.rounds, "tokens": args.tokens, "threads_per_server": 1,
           "machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
           "policy": args.policy or "the proxy's default", "phases": {}}
    servers = start(configs(files, "target-v1", ports), work)
    proxy = start_proxy({name: urls[name] for name in FIXED}, proxy_port, f"sqlite:///{work / 'proxy.db'}",
                        work / "proxy.log", policy=args.policy, admin_port=admin_port)
    client = httpx.Client(timeout=300)
    try:
        out["phases"]["v1"] = phase(client, urls, prompts, args.rounds, args.tokens)
        for s in servers.values():
            s.stop()
        servers = start(configs(files, "target-v2", ports), work)
        client.close()  # its kept-alive connections went with the old servers
        client = httpx.Client(timeout=300)
        deadline = time.monotonic() + 30
        while any(p["healthy"] is False or "target-v2" not in (p["target_version"] or "")
                  for p in client.get(f"http://127.0.0.1:{admin_port}/pools").json()["pools"]):
            if time.monotonic() > deadline:
                raise RuntimeError("the proxy did not see target v2")
            time.sleep(0.2)
        out["phases"]["v2"] = phase(client, urls, prompts, args.rounds, args.tokens)
        out["phases"]["v2"]["moved_to_off_after"] = {d: moved_after(p) for d, p in
                                                     out["phases"]["v2"]["proxy_pools"].items()}
        direct = {name: urls[name] for name in FIXED}  # each pair: direct to the pool the proxy served it from
        out["overhead"] = paired(client, direct, urls[PROXY], args.pairs, stream=False)
        out["first_byte"] = paired(client, direct, urls[PROXY], args.pairs // 2, stream=True)
    finally:
        client.close()
        proxy.terminate()
        proxy.wait(30)
        for s in servers.values():
            s.stop()
    report(out)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")


def report(out: dict) -> None:
    console = Console(width=200)
    table = Table(title=f"tokens/s through llama.cpp pools ({out['size']} kit, {out['tokens']} tokens, "
                        f"{out['rounds']} requests per domain and configuration, 1 thread per server; "
                        f"proxy policy: {out.get('policy', 'pool-ucb+switch')})")
    for col in ("phase", "domain", DEFAULT, *FIXED, PROXY, "best fixed", "proxy/best", "proxy/default",
                "proxy pools"):
        table.add_column(col, justify="left" if col in ("phase", "domain", "proxy pools") else "right")
    for name, ph in out["phases"].items():
        for domain, rates in ph["tokens_per_second"].items():
            best = max(FIXED, key=lambda k: rates[k])
            pools = ph["proxy_pools"][domain]
            share = ", ".join(f"{p} {pools.count(p)}" for p in FIXED if pools.count(p))
            ph.setdefault("goals", {})[domain] = {"best_fixed": best, "proxy_vs_best": rates[PROXY] / rates[best],
                                                  "proxy_vs_default": rates[PROXY] / rates[DEFAULT]}
            table.add_row(name, domain, *(f"{rates[c]:.1f}" for c in (DEFAULT, *FIXED, PROXY)), best,
                          f"{rates[PROXY] / rates[best]:.1%}", f"{rates[PROXY] / rates[DEFAULT]:.1%}", share)
    console.print(table)
    console.print(f"stale phase: requests until the proxy served off on 8 of 10: "
                  f"{out['phases']['v2']['moved_to_off_after']}")
    o, f = out["overhead"], out["first_byte"]
    console.print(f"proxy overhead per request: p50 {o['p50_ms']:.2f} ms, p99 {o['p99_ms']:.2f} ms "
                  f"(direct p50 {o['direct_p50_ms']:.2f} ms, {o['pairs']} pairs); first streamed byte added: "
                  f"p50 {f['p50_ms']:.2f} ms, p99 {f['p99_ms']:.2f} ms")


if __name__ == "__main__":
    main()
