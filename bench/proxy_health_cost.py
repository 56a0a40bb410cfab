"""Benchmark: the time the proxy adds to a request on the real model, and how much of it is the engine's.

Two identical llama-servers (SmolLM2-135M-Instruct Q4_1, no speculation, one thread each): ``A`` is only
ever asked directly and nobody checks its health; ``B`` sits behind `specwatch proxy` (its health checks
every --health-seconds) beside five idle pools of other kinds, as in bench/real_model.py, and is also asked
directly. Interleaved request by request, the same chat prompt for all three:

    A direct          the engine with nothing around it
    B direct          the same engine while the proxy checks it: B direct - A direct = what checks cost B
    proxy -> B        through the proxy: proxy -> B - B direct = the proxy's own path

Per configuration: tokens/s, the wall time added per request against ``A direct`` (median, mean) and the
engine's own time (prompt_ms + predicted_ms from its timings) added likewise, which tells a slower engine
from a slower path. Writes bench/results/proxy_health_cost.json (one entry per --label). Not a test.

    python bench/proxy_health_cost.py [--requests 40] [--tokens 64] [--health-seconds 2] [--label NAME] [--repo DIR]
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

from agent.engines.llamacpp import LlamaServer, free_port  # noqa: E402
from agent.pretrained.prepare import Prepared  # noqa: E402
from agent.pretrained.prompts import prompts as prompt_set  # noqa: E402
from bench.engine_llamacpp import start_proxy  # noqa: E402
from bench.real_model import POOLS, ask, server_config  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "proxy_health_cost.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--health-seconds", type=float, default=2.0, help="the proxy's (default: its own, 2)")
    parser.add_argument("--label", default=None, help="the entry's name in the JSON (default: the interval)")
    parser.add_argument("--repo", type=Path, default=None,
                        help="run the proxy from this checkout (default: this one), to compare two versions")
    args = parser.parse_args()
    label = args.label or f"checks every {args.health_seconds:g} s"
    model = Prepared.read("smollm2-135m")
    work = Path(tempfile.mkdtemp(prefix="bench-health-"))
    a = LlamaServer(server_config(model, "off", free_port()), log_path=work / "a.log")
    pools = {name: LlamaServer(server_config(model, name, free_port()), log_path=work / f"{name}.log")
             for name in POOLS}
    servers, proxy = [a, *pools.values()], None
    try:
        for s in servers:
            s.start()
        port = free_port()
        # the policy routes every request to B (the off pool): what is measured is the path, not a choice
        proxy = start_proxy({n: s.base_url for n, s in pools.items()}, port, f"sqlite:///{work / 'p.db'}",
                            work / "proxy.log", health_seconds=args.health_seconds, policy="fixed:0",
                            **({"repo": args.repo} if args.repo else {}))
        urls = {"A direct": a.base_url, "B direct": pools["off"].base_url, "proxy -> B": f"http://127.0.0.1:{port}"}
        rows = {name: [] for name in urls}
        chats = prompt_set("chat", "heldout")
        with httpx.Client(timeout=300) as client:
            for i in range(args.requests):
                names = list(urls)
                for j in range(len(names)):
                    name = names[(i + j) % len(names)]
                    rows[name].append(ask(client, urls[name], "chat", chats[i % len(chats)].messages, args.tokens,
                                          f"h{i}{j}"))
                print(f"\r{i + 1}/{args.requests}", end="", file=sys.stderr)
        print(file=sys.stderr)
    finally:
        if proxy is not None:
            proxy.terminate()
            proxy.wait(60)
        for s in servers:
            s.stop()
    entry = {"requests": args.requests, "tokens": args.tokens, "health_seconds": args.health_seconds,
             "configurations": {}}
    base = rows["A direct"]
    print(f"{label}: {args.requests} requests of {args.tokens} tokens per configuration")
    print(f"{'configuration':<14} {'tok/s':>6}  {'added wall ms (median, mean)':>30}  {'added engine ms (median, mean)':>31}")
    for name, got in rows.items():
        pairs = [(r, d) for r, d in zip(got, base) if r["n"] == d["n"]]
        wall = [(r["wall"] - d["wall"]) * 1000 for r, d in pairs]
        engine = [(r["engine"] - d["engine"]) * 1000 for r, d in pairs]
        c = entry["configurations"][name] = {
            "tokens_per_second": sum(r["n"] for r in got) / sum(r["wall"] for r in got),
            "added_wall_ms_median": statistics.median(wall), "added_wall_ms_mean": statistics.mean(wall),
            "added_engine_ms_median": statistics.median(engine), "added_engine_ms_mean": statistics.mean(engine),
            "pools": sorted({r["pool"] for r in got if r["pool"]})}
        print(f"{name:<14} {c['tokens_per_second']:6.1f}  {c['added_wall_ms_median']:14.1f} {c['added_wall_ms_mean']:14.1f}"
              f"  {c['added_engine_ms_median']:15.1f} {c['added_engine_ms_mean']:15.1f}")
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    if "configurations" in results:  # the earlier layout: one run, one server
        results = {"one server (earlier layout)": results}
    results[label] = entry
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
