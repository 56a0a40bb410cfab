"""Benchmark: what the proxy's health checks cost the pool it serves from, on the real model.

Each health check asks a pool's llama-server for /health, /props and /slots; /props and /slots wait for the
server's task loop, between decoding steps. One llama-server (SmolLM2-135M-Instruct Q4_1, no speculation,
one thread) is asked directly and through `specwatch proxy` with health checks every 0.5 s (what the engine
benchmarks use, for quick failover in their runs) and every 2 s (the proxy's default), interleaved request by
request, same prompt for all three. Prints tokens/s and the added wall time per request; writes
bench/results/proxy_health_cost.json. Not a test.

    python bench/proxy_health_cost.py [--requests 30] [--tokens 64]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.engines.llamacpp import LlamaServer, LlamaServerConfig, free_port  # noqa: E402
from agent.pretrained.prepare import Prepared  # noqa: E402
from agent.pretrained.prompts import prompts as prompt_set  # noqa: E402
from bench.engine_llamacpp import start_proxy  # noqa: E402
from bench.real_model import ask  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "proxy_health_cost.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    model = Prepared.read("smollm2-135m")
    work = Path(tempfile.mkdtemp(prefix="bench-health-"))
    server = LlamaServer(LlamaServerConfig(model=model.target_gguf, threads=1, ctx_size=2048),
                         log_path=work / "off.log").start()
    proxies, urls = [], {"direct": server.base_url}
    try:
        for seconds in (0.5, 2.0):
            port = free_port()
            proxies.append(start_proxy({"off": server.base_url}, port, f"sqlite:///{work / f'{seconds}.db'}",
                                       work / f"proxy-{seconds}.log", health_seconds=seconds))
            urls[f"proxy, checks every {seconds:g} s"] = f"http://127.0.0.1:{port}"
        rows = {name: [] for name in urls}
        chats = prompt_set("chat", "heldout")
        with httpx.Client(timeout=300) as client:
            for i in range(args.requests):
                names = list(urls)
                for j in range(len(names)):
                    name = names[(i + j) % len(names)]
                    rows[name].append(ask(client, urls[name], "chat", chats[i].messages, args.tokens, f"h{i}{j}"))
    finally:
        for p in proxies:
            p.terminate()
            p.wait(60)
        server.stop()
    out = {"requests": args.requests, "tokens": args.tokens, "configurations": {}}
    for name, got in rows.items():
        added = [(r["wall"] - d["wall"]) * 1000 for r, d in zip(got, rows["direct"]) if r["n"] == d["n"]]
        out["configurations"][name] = {
            "tokens_per_second": sum(r["n"] for r in got) / sum(r["wall"] for r in got),
            "added_ms_median": statistics.median(added), "added_ms_mean": statistics.mean(added)}
        c = out["configurations"][name]
        print(f"{name:<28} {c['tokens_per_second']:6.1f} tok/s   added per request: median "
              f"{c['added_ms_median']:6.1f} ms, mean {c['added_ms_mean']:6.1f} ms")
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
