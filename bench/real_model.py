"""Benchmark: the proxy steering real llama.cpp servers on a real pretrained model (SmolLM2-135M-Instruct,
Q4_1 as its package ships it), with both kinds of speculation operators run.

Pools, each a llama-server of its own on one thread (the machine has 2 shared cores; requests run one at a
time, so one server computes at a time): ``off`` (no speculation); n-gram self-speculation without a draft
model, ``k8`` and ``k24`` (ngram-mod capped at 8 and 24 drafted tokens a step) and ``k64`` (llama.cpp's
``--spec-default``: ngram-mod up to 64); the draft specwatch distilled for the model (``specwatch models
pretrained``) at ``k2`` and ``k3`` (draft-simple, K = 3 is llama.cpp's default draft length). The proxy
(`specwatch proxy`, its default policy or --policy) routes among a second set of the same pools, so no
server sees a prompt twice (ngram-mod learns from every text a server decodes) and the fixed pools' figures
are those of a pool that served every request.

Two domains of held-out prompts (agent/pretrained/prompts.py): ``copy`` (the answer copies text from the
prompt) and ``chat`` (open questions). Per request: a greedy chat completion of up to --tokens tokens; the
rate is generated tokens over the request's wall time at the client. Configurations are interleaved request
by request (in a rotating order) so background load hits them alike. Goals: the proxy >= 95% of the best
fixed pool per domain over all requests and >= 90% over each domain's first 20; >= the --spec-default pool
and >= the draft pool at llama.cpp's default K in every domain; the proxy's stored records equal the
engine's own per-request figures (drafted, accepted, tokens) summed per domain and pool.
Not a test: prints a table and writes bench/results/real_model.json.

    python bench/real_model.py [--requests 200] [--tokens 64] [--policy NAME] [--default-pool k64] [--quick]
    python bench/real_model.py --show      # the last run's tables again, and the summary as markdown
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
import time
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.engines.llamacpp import LlamaServer, LlamaServerConfig, free_port  # noqa: E402
from agent.pretrained.prepare import Prepared  # noqa: E402
from agent.pretrained.prompts import prompts as prompt_set  # noqa: E402
from bench.engine_llamacpp import start_proxy  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "real_model.json"
# name: (speculation, lookahead); names are the proxy's pool names (kN: at most N drafted per step)
POOLS = {"off": ("draft", 0), "k8": ("ngram-mod", 8), "k24": ("ngram-mod", 24), "k64": ("default", 64),
         "k2": ("draft", 2), "k3": ("draft", 3)}
SPEC_DEFAULT, DRAFT_DEFAULT = "k64", "k3"  # llama.cpp's --spec-default; its draft at the default K
PROXY = "proxy"
DOMAINS = ("copy", "chat")


def server_config(model: Prepared, name: str, port: int) -> LlamaServerConfig:
    kind, k = POOLS[name]
    draft = model.draft_gguf if kind == "draft" and k else None
    return LlamaServerConfig(model=model.target_gguf, draft=draft, speculation=kind, lookahead=k, threads=1,
                             ctx_size=2048, metrics=True, port=port)


def ask(client: httpx.Client, url: str, domain: str, messages: list, tokens: int, request_id: str) -> dict:
    """One greedy chat completion: tokens, wall seconds, the engine's figures, the pool that served it."""
    body = {"messages": messages, "max_tokens": tokens, "temperature": 0.0, "cache_prompt": False}
    started = time.perf_counter()
    answer = client.post(url + "/v1/chat/completions", json=body,
                         headers={"X-Specwatch-Domain": domain, "X-Request-Id": request_id})
    wall = time.perf_counter() - started
    answer.raise_for_status()
    t = answer.json()["timings"]
    return {"n": t["predicted_n"], "wall": wall, "engine": (t.get("prompt_ms", 0) + t.get("predicted_ms", 0)) / 1000,
            "prompt": t.get("prompt_ms", 0) / 1000, "drafted": t.get("draft_n", 0),
            "accepted": t.get("draft_n_accepted", 0), "pool": answer.headers.get("x-specwatch-pool", "")}


def run(client, urls: dict[str, str], requests: int, tokens: int, progress, partial: Path) -> dict:
    """Interleaved: request i of each domain goes to every configuration, the order rotating with i. The log
    so far is written to ``partial`` every 10 requests (a long run interrupted keeps what it measured)."""
    sets = {d: prompt_set(d, "heldout")[:requests] for d in DOMAINS}
    names = list(urls)
    log: dict = {d: {c: [] for c in names} for d in DOMAINS}
    for i in range(requests):
        for domain in DOMAINS:
            prompt = sets[domain][i % len(sets[domain])]
            for j in range(len(names)):
                name = names[(i + j) % len(names)]
                log[domain][name].append(ask(client, urls[name], domain, prompt.messages, tokens,
                                             f"{domain}-{i}-{name}"))
        progress(i + 1, requests)
        if (i + 1) % 10 == 0:
            partial.write_text(json.dumps(log))
    return log


def rate(rows: list[dict]) -> float:
    return sum(r["n"] for r in rows) / sum(r["wall"] for r in rows)


def stored(db: str) -> dict:
    """The proxy's stored sums per (domain, lookahead), read through the store as `specwatch stats` does;
    tokens = steps + accepted (each step emits its accepted tokens and one more)."""
    from storage import Store
    from storage.query import StatsQuery

    store = Store.open(db)
    try:
        rows = store.stats(StatsQuery(until=time.time() + 60, by=("domain", "lookahead"))).rows
    finally:
        store.close()
    return {(r["domain"], r["lookahead"]): {**r, "emitted": r["steps"] + r["accepted"]} for r in rows}


def records_check(log: dict, rows: dict) -> list[dict]:
    """Per domain and pool the proxy served: the engine's per-request figures summed vs the stored sums."""
    checks = []
    for domain, by in log.items():
        for name, (_, k) in POOLS.items():
            served = [r for r in by[PROXY] if r["pool"] == name]
            if not served:
                continue
            row = rows.get((domain, k), {})
            engine = {"requests": len(served), "drafted": sum(r["drafted"] for r in served),
                      "accepted": sum(r["accepted"] for r in served), "tokens": sum(r["n"] for r in served)}
            mine = {"drafted": row.get("drafted"), "accepted": row.get("accepted"), "tokens": row.get("emitted")}
            checks.append({"domain": domain, "pool": name, "engine": engine, "stored": mine,
                           "equal": all(engine[key] == mine[key] for key in mine)})
    return checks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200, help="per domain and configuration")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--policy", default=None, help="the proxy's policy (default: the proxy's own)")
    parser.add_argument("--default-pool", default=SPEC_DEFAULT,
                        help="the proxy's --default-pool (default k64: llama.cpp's own --spec-default); '' for none")
    parser.add_argument("--health-seconds", type=float, default=2.0,
                        help="the proxy's health-check interval (default: its own default, 2)")
    parser.add_argument("--repo", type=Path, default=None,
                        help="run the proxy from this checkout (default: this one), to compare two versions")
    parser.add_argument("--quick", action="store_true", help="20 requests, 32 tokens")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.quick:
        args.requests, args.tokens = 20, 32
    model = Prepared.read("smollm2-135m")
    if model.draft_gguf is None:
        raise SystemExit("the distilled draft is not installed: run specwatch models pretrained")
    work = Path(tempfile.mkdtemp(prefix="bench-real-"))
    fixed = {name: LlamaServer(server_config(model, name, free_port()), log_path=work / f"{name}.log")
             for name in POOLS}
    behind = {name: LlamaServer(server_config(model, name, free_port()), log_path=work / f"proxy-{name}.log")
              for name in POOLS}
    servers = [*fixed.values(), *behind.values()]
    db = f"sqlite:///{work / 'proxy.db'}"
    out = {"model": model.name, "target_version": model.target_version, "draft_version": model.draft_version,
           "requests": args.requests, "tokens": args.tokens, "threads_per_server": 1,
           "pools": {n: {"speculation": s, "lookahead": k} for n, (s, k) in POOLS.items()},
           "machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
           "policy": args.policy or "the proxy's default", "default_pool": args.default_pool or None,
           "health_seconds": args.health_seconds, "proxy_checkout": str(args.repo) if args.repo else "this one"}
    proxy = None
    try:
        for s in servers:
            s.start()
        port = free_port()
        proxy = start_proxy({n: s.base_url for n, s in behind.items()}, port, db, work / "proxy.log",
                            health_seconds=args.health_seconds, policy=args.policy,
                            extra=("--default-pool", args.default_pool) if args.default_pool else (),
                            **({"repo": args.repo} if args.repo else {}))
        urls = {**{n: s.base_url for n, s in fixed.items()}, PROXY: f"http://127.0.0.1:{port}"}
        began = time.monotonic()
        with httpx.Client(timeout=600) as client:
            log = run(client, urls, args.requests, args.tokens,
                      lambda i, n: print(f"\r{i}/{n} requests per domain and configuration, "
                                         f"{time.monotonic() - began:.0f} s", end="", file=sys.stderr),
                      args.out.with_suffix(".partial.json"))
        print(file=sys.stderr)
    finally:
        if proxy is not None:
            proxy.terminate()
            proxy.wait(60)
        for s in servers:
            s.stop()
    out["seconds"] = round(time.monotonic() - began, 1)
    out["log"] = log
    try:
        out["records"] = records_check(log, stored(db))
    except Exception as exc:  # noqa: BLE001 - the measured log is kept whatever the check hits
        out["records"] = []
        print(f"records check failed: {exc}", file=sys.stderr)
    report(out)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    args.out.with_suffix(".partial.json").unlink(missing_ok=True)
    print(markdown(out))


def summary(out: dict) -> dict:
    """Per domain: tokens/s of each configuration over all requests and the first 20, and the goals."""
    res = {}
    for domain, by in out["log"].items():
        whole = {c: rate(rows) for c, rows in by.items()}
        first = {c: rate(rows[:20]) for c, rows in by.items()}
        best, best20 = (max(POOLS, key=lambda c: r[c]) for r in (whole, first))
        pools = [r["pool"] for r in by[PROXY]]
        res[domain] = {"tokens_per_second": whole, "first_20": first, "best_fixed": best, "best_fixed_20": best20,
                       "proxy_vs_best": whole[PROXY] / whole[best], "proxy_vs_best_20": first[PROXY] / first[best20],
                       "proxy_vs_spec_default": whole[PROXY] / whole[SPEC_DEFAULT],
                       "proxy_vs_draft_default": whole[PROXY] / whole[DRAFT_DEFAULT],
                       "proxy_pools": {p: pools.count(p) for p in POOLS if pools.count(p)},
                       **where_the_time_went(by)}
    return res


def where_the_time_went(by: dict) -> dict:
    """The proxy's loss against the best fixed pool, split: its choices, each valued at the chosen fixed
    pool's own rate on the same prompt (``choices_vs_best``); and per request, against that fixed pool on the
    same prompt, the wall time added (median), of which the engine's own time (prompt + generation, from
    its timings) and the rest, the path through the proxy. Rows from a run before the engine's time was
    logged give the choices only."""
    proxy = by[PROXY]
    valued = [by[r["pool"]][i] for i, r in enumerate(proxy)]
    best = max(rate(by[c]) for c in POOLS)
    out = {"choices_vs_best": rate(valued) / best}
    if all("engine" in r for r in proxy) and all("engine" in r for r in valued):
        wall = [(r["wall"] - v["wall"]) * 1000 for r, v in zip(proxy, valued)]
        engine = [(r["engine"] - v["engine"]) * 1000 for r, v in zip(proxy, valued)]
        path = [(r["wall"] - r["engine"] - v["wall"] + v["engine"]) * 1000 for r, v in zip(proxy, valued)]
        out.update(added_wall_ms=statistics.median(wall), added_engine_ms=statistics.median(engine),
                   added_path_ms=statistics.median(path))
    return out


def report(out: dict) -> None:
    out["summary"] = s = summary(out)
    console = Console(width=220)
    table = Table(title=f"tokens/s, {out['model']} Q4_1 behind llama.cpp pools ({out['tokens']} tokens, "
                        f"{out['requests']} requests per domain and configuration, 1 thread per server; "
                        f"proxy policy: {out['policy']})")
    for col in ("domain", "horizon", *POOLS, PROXY, "best fixed", "proxy/best", "proxy/k64 (spec-default)",
                "proxy/k3 (draft default)", "proxy pools"):
        table.add_column(col, justify="left" if col in ("domain", "horizon", "proxy pools") else "right")
    for domain, r in s.items():
        for horizon, rates, best, ratio in (("all", r["tokens_per_second"], r["best_fixed"], r["proxy_vs_best"]),
                                            ("first 20", r["first_20"], r["best_fixed_20"], r["proxy_vs_best_20"])):
            table.add_row(domain, horizon, *(f"{rates[c]:.1f}" for c in (*POOLS, PROXY)), best, f"{ratio:.1%}",
                          f"{rates[PROXY] / rates[SPEC_DEFAULT]:.1%}", f"{rates[PROXY] / rates[DRAFT_DEFAULT]:.1%}",
                          ", ".join(f"{p} {n}" for p, n in r["proxy_pools"].items()) if horizon == "all" else "")
    console.print(table)
    acc = Table(title="per pool: drafted per request, acceptance (accepted / drafted), and the proxy's stored "
                      "records against the engine's own figures")
    for col in ("domain", "pool", "drafted/request", "acceptance", "proxy requests", "records equal"):
        acc.add_column(col)
    checks = {(c["domain"], c["pool"]): c for c in out["records"]}
    for domain, by in out["log"].items():
        for name in POOLS:
            rows = by[name]
            drafted = sum(r["drafted"] for r in rows)
            c = checks.get((domain, name))
            acc.add_row(domain, name, f"{drafted / len(rows):.1f}",
                        f"{sum(r['accepted'] for r in rows) / drafted:.3f}" if drafted else "-",
                        str(c["engine"]["requests"]) if c else "0", ("yes" if c["equal"] else "NO") if c else "-")
    console.print(acc)
    for domain, r in s.items():
        line = f"{domain}: the proxy's choices at the fixed pools' own rates: {r['choices_vs_best']:.1%} of the best"
        if "added_wall_ms" in r:
            line += (f"; per request against the same pool and prompt (median): {r['added_wall_ms']:+.1f} ms wall, "
                     f"{r['added_engine_ms']:+.1f} ms in the engine, {r['added_path_ms']:+.1f} ms on the path")
        console.print(line)
    console.print(f"{out['seconds']:.0f} s")


def markdown(out: dict) -> str:
    """The summary as a markdown table (README, docs): ``python bench/real_model.py --show``."""
    s = out["summary"]
    head = ["domain", "requests", *POOLS, PROXY, "best fixed", "proxy/best", "proxy/k64", "proxy/k3"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for domain, r in s.items():
        for horizon, rates, best, ratio in (("all", r["tokens_per_second"], r["best_fixed"], r["proxy_vs_best"]),
                                            ("first 20", r["first_20"], r["best_fixed_20"], r["proxy_vs_best_20"])):
            n = out["requests"] if horizon == "all" else 20
            lines.append("| " + " | ".join([domain, str(n), *(f"{rates[c]:.1f}" for c in (*POOLS, PROXY)), best,
                                            f"**{ratio:.1%}**", f"{rates[PROXY] / rates[SPEC_DEFAULT]:.1%}",
                                            f"{rates[PROXY] / rates[DRAFT_DEFAULT]:.1%}"]) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--show"]:  # the table of the last run, without running anything
        saved = json.loads(RESULTS.read_text())
        report(saved)
        print(markdown(saved))
    else:
        main()
