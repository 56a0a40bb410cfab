"""Benchmark: does the proxy's path slow a busy server? One speculating llama-server asked directly, an identical
one through `specwatch proxy` (that pool alone), at 1 and then 8 requests in flight, interleaved.

Two llama-servers of SmolLM2-135M-Instruct F16 with ngram-mod capped at 24 (``k24`` of bench/load_aware.py: 8
slots, one thread), ``direct`` pinned to core 0 and ``proxied`` to core 1 (the proxy's pool checks every 2 s).
First --history requests one at a time (as bench/load_aware.py's first level), then --blocks blocks of 32 at 8
in flight; blocks alternate which path goes first, and no prompt is sent twice (ngram-mod learns from every
text a server decodes). Per path and phase: requests, the engine's decoding time a token (its prompt_ms +
predicted_ms less the prompt's, over the tokens) and tokens/s of a request; the servers' threads and open
connections after each phase. bench/load_aware.py found one server behind the proxy decoding 10-40% slower a
token at 4-8 in flight than any other; this isolates the path (one pool, no routing) from the routing.
Not a test: prints a table and writes bench/results/proxy_path_load.json.

    python bench/proxy_path_load.py [--history 40] [--blocks 4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.engines.llamacpp import LlamaServer, free_port  # noqa: E402
from agent.pretrained.f16 import f16_target  # noqa: E402
from agent.pretrained.prepare import Prepared  # noqa: E402
from agent.pretrained.prompts import prompts as prompt_set  # noqa: E402
from bench.engine_llamacpp import start_proxy  # noqa: E402
from bench.load_aware import config, pin_to  # noqa: E402
from bench.load_report import decoding_ms, rate  # noqa: E402
from bench.real_model import ask  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "proxy_path_load.json"
PATHS = ("direct", "proxied")


def held(server: LlamaServer) -> dict:
    """The server's threads and its open TCP connections (ss)."""
    ss = subprocess.run(["ss", "-tanp"], capture_output=True, text=True).stdout
    return {"threads": len(os.listdir(f"/proc/{server.pid}/task")), "connections": ss.count(f"pid={server.pid},")}


def figures(rows: list[dict]) -> dict:
    return {"requests": len(rows), "decoding_ms": decoding_ms(rows), "tokens_per_s": rate(rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="example: python bench/proxy_path_load.py --history 40 --blocks 4")
    parser.add_argument("--history", type=int, default=40, help="requests a path one at a time first (default 40)")
    parser.add_argument("--blocks", type=int, default=4, help="blocks of 32 requests a path at 8 in flight")
    args = parser.parse_args()
    chat, copy = prompt_set("chat", "heldout"), prompt_set("copy", "heldout")
    items = [(d, p) for pair in zip(chat, copy) for d, p in zip(("chat", "copy"), pair)]
    need = 2 * (args.history + 32 * args.blocks)
    if need > len(items):
        raise SystemExit(f"{need} prompts needed, {len(items)} held out: lower --history or --blocks")
    work = Path(tempfile.mkdtemp(prefix="bench-path-"))
    target = f16_target(Prepared.read("smollm2-135m"))
    servers = {p: LlamaServer(config(target, "k24", 8, 1), log_path=work / f"{p}.log") for p in PATHS}
    rows: dict = {p: {"1": [], "8": []} for p in PATHS}
    out: dict = {"model": "smollm2-135m F16", "pool": "k24 (ngram-mod, n_max 24)", "history": args.history,
                 "blocks": args.blocks, "held": {}}
    proxy = None
    try:
        for core, s in zip(("0", "1"), servers.values()):
            s.start()
            pin_to(s.pid, core)
        port = free_port()
        proxy = start_proxy({"k24": servers["proxied"].base_url}, port, f"sqlite:///{work / 'proxy.db'}",
                            work / "proxy.log", health_seconds=2.0)
        urls = {"direct": servers["direct"].base_url, "proxied": f"http://127.0.0.1:{port}"}
        with httpx.Client(timeout=600, limits=httpx.Limits(max_connections=64)) as client:
            def run(path: str, batch: list, level: int, tag: str) -> None:
                def one(x):
                    i, (domain, prompt) = x
                    return {"domain": domain, **ask(client, urls[path], domain, prompt.messages, 64, f"{tag}-{i}")}
                with ThreadPoolExecutor(level) as pool:
                    rows[path][str(level)] += list(pool.map(one, enumerate(batch)))

            k = 0
            for level, size, count in ((1, 4, args.history // 4), (8, 32, args.blocks)):
                for b in range(count):
                    for path in (PATHS if b % 2 == 0 else PATHS[::-1]):
                        run(path, items[k:k + size], level, f"{level}-{b}-{path}")
                        k += size
                    print(f"\r{level} in flight: block {b + 1}/{count}", end="", file=sys.stderr)
                print(file=sys.stderr)
                out["held"][str(level)] = {p: held(s) for p, s in servers.items()}
    finally:
        if proxy is not None:
            proxy.terminate()
            proxy.wait(60)
        for s in servers.values():
            s.stop()
    out["figures"] = {level: {p: figures(rows[p][level]) for p in PATHS} for level in ("1", "8")}
    out["rows"] = rows
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=1) + "\n")
    print("| in flight | path | requests | decoding ms a token | tokens/s of a request | threads, connections |")
    print("|---|---|---|---|---|---|")
    for level, by in out["figures"].items():
        for p, f in by.items():
            h = out["held"][level][p]
            print(f"| {level} | {p} | {f['requests']} | {f['decoding_ms']:.1f} | {f['tokens_per_s']:.2f} | "
                  f"{h['threads']}, {h['connections']} |")


if __name__ == "__main__":
    main()
