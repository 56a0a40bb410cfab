"""``specwatch recommend``: per domain and pod-wide, the K the history supports, as engines' start-up flags."""

from __future__ import annotations

import json
import time
from enum import Enum
from typing import Annotated, Optional

import typer

from agent.advice import engine_flags
from agent.advice.loads import engine_config, schedules as load_schedules, speeds
from agent.advice.pools import configure, plan
from agent.advice.recommend import Recommendation, pool_name, recommend
from agent.cli.output import Format, console, emit_rows, fail
from agent.cli.stats import DbOption, open_store
from agent.runtime.times import iso, parse_time
from storage import StoreError

EXAMPLE = "Example: specwatch recommend --db sqlite:///specwatch.db --since 24h --engine llamacpp --draft draft.gguf"
Engine = Enum("Engine", {e: e for e in (*engine_flags.ENGINES, "all")}, type=str)


def recommend_cmd(
    db: DbOption = None,
    since: Annotated[str, typer.Option(help="History from: a span back from now (30m, 24h, 7d) or an ISO time.")
                     ] = "24h",
    domain: Annotated[Optional[str], typer.Option(help="Only this domain (the pod-wide K then fits it alone).")
                      ] = None,
    engine: Annotated[Engine, typer.Option(help="Flags for llamacpp, vllm, sglang, trtllm or all.")] = Engine.all,
    draft: Annotated[str, typer.Option(help=(
        "The draft model's path or id, as the flags should name it; for llama.cpp n-gram self-speculation "
        "the kind instead (ngram-mod, ngram-simple, ngram-map-k, ngram-cache): K is then the cap on what a "
        "step drafts."))
                     ] = engine_flags.DRAFT,
    fmt: Annotated[Format, typer.Option("--format", help="table, json or csv.")] = Format.table,
) -> None:
    """Per domain, the lookahead K (0: speculation off) of best measured goodput (tokens per second of step
    time, K = 0 included) in the history of the latest target and draft versions, with how clear the choice
    is, or "not enough data"; then one K for the whole pod (an engine's K is fixed at start-up for every
    domain: the K of best goodput over the domains' traffic) and which domains gain from a pool of their own.
    Each K is printed as the engines' own start-up flags, and each pool `specwatch proxy` would route to
    (the pod's K, then one per K routed domains are worth) as each engine's configuration of it: vLLM's
    --speculative-config with the per-request metrics flag, SGLang's flags and adaptive config, TensorRT-LLM's
    speculative_config with its draft_len_schedule. Where the history holds requests by the load they met
    (the proxy records it), also the K of best speed at each load, pod-wide and per domain, as the schedules
    the engines take: vLLM's num_speculative_tokens_per_batch_size, TensorRT-LLM's draft_len_schedule, a pool
    split by load for llama.cpp and SGLang."""
    now = time.time()
    try:
        start = parse_time(since, now)
    except ValueError as exc:
        raise fail(str(exc))
    store = open_store(db)
    try:
        result = recommend(store, since=start, now=now, domain=domain)
        by_load = load_schedules(speeds(store, start, now, domain))
    except (StoreError, ValueError) as exc:
        raise fail(str(exc))
    finally:
        store.close(flush=False)
    engines = engine_flags.ENGINES if engine is Engine.all else (engine.value,)
    if fmt is Format.json:
        print(json.dumps({**result.to_dict(), "flags": flag_table(result, engines, draft),
                          "pools": pool_table(result, engines, draft),
                          "load_schedules": [{"name": s.name, "bands": s.rows(), "by_batch": s.by_batch(),
                                              "engines": {e: engine_config(e, s) for e in engines}}
                                             for s in by_load]}, indent=2))
    elif fmt is Format.csv:
        emit_rows(csv_rows(result, engines, draft), fmt)
    else:
        show(result, engines, draft)
        show_loads(by_load, engines)


def show_loads(by_load: list, engines: tuple[str, ...]) -> None:
    """K per load (agent/advice/loads.py), pod-wide and per domain, and each engine's form of it."""
    if not by_load:
        return
    emit_rows([row for s in by_load for row in s.rows()], Format.table,
              title="by load (requests in flight on their pool): the K of best speed at each load; "
                    "measured no: carried from the nearest measured load")
    for s in by_load:
        for e in engines:
            console.print(f"  {s.name}, {engine_flags.NAMES[e]}: {engine_config(e, s)}", highlight=False,
                          soft_wrap=True)


def flag_table(result: Recommendation, engines: tuple[str, ...], draft: str) -> dict:
    """{engine: {"pod": flags, "domains": {domain: flags}}}; None where there is no K to print."""
    def of(engine: str, k: int | None) -> str | None:
        return None if k is None else engine_flags.flags(engine, k, draft)
    return {e: {"pod": of(e, result.pod.lookahead), "domains": {d.domain: of(e, d.lookahead) for d in result.domains}}
            for e in engines}


def pool_table(result: Recommendation, engines: tuple[str, ...], draft: str) -> list[dict]:
    """Per pool the recommendation asks for: its name, K, domains, whether they were routed there, the K it
    adapts between, and each engine's configuration (flags and files)."""
    out = []
    for p in plan(result):
        configs = {e: configure(e, p, draft) for e in engines}
        out.append({"name": p.name, "lookahead": p.lookahead, "domains": list(p.domains), "own": p.own,
                    "adaptive": list(p.adaptive),
                    "config": {e: {"flags": c.flags, "files": dict(c.files)} for e, c in configs.items()}})
    return out


def rows(result: Recommendation) -> list[dict]:
    out = []
    for d in result.domains:
        plain, best = d.goodput(0), None if d.lookahead is None else d.goodput(d.lookahead)
        out.append({"domain": d.domain, "lookahead": d.lookahead, "speculate": d.speculate,
                    "pool": None if d.lookahead is None else pool_name(d.lookahead), "tokens_per_second": best,
                    "speedup": best / plain if best and plain else None,
                    "steps": sum(a.steps for a in d.arms), "reason": d.reason})
    return out


def csv_rows(result: Recommendation, engines: tuple[str, ...], draft: str) -> list[dict]:
    table = flag_table(result, engines, draft)
    out = [{**row, **{f"{e}_flags": table[e]["domains"][row["domain"]] for e in engines}} for row in rows(result)]
    pod = result.pod
    out.append({"domain": "(pod)", "lookahead": pod.lookahead,
                "speculate": None if pod.lookahead is None else pod.lookahead > 0,
                "pool": None if pod.lookahead is None else pool_name(pod.lookahead),
                "tokens_per_second": pod.goodput, "speedup": None, "steps": None, "reason": pod.reason,
                **{f"{e}_flags": table[e]["pod"] for e in engines}})
    return out


def show(result: Recommendation, engines: tuple[str, ...], draft: str) -> None:
    if result.target_version is None:
        console.print("no history stored: nothing to recommend", highlight=False)
        return
    title = (f"target {result.target_version}, draft {result.draft_version}: "
             f"{iso(result.since)} .. {iso(result.until)}")
    if result.domains:
        emit_rows(rows(result), Format.table, title=title)
    else:
        console.print(f"{title}: no steps", highlight=False)
    pod = result.pod
    console.print(f"\npod-wide: {pod.reason}", highlight=False)
    for r in pod.routes:
        console.print(f"  route {r.domain} to a pool with K={r.lookahead} (proxy pool {pool_name(r.lookahead)}): "
                      f"+{r.gain:.0%} goodput over the pod's K", highlight=False)
    table, pools = flag_table(result, engines, draft), pool_table(result, engines, draft)
    for e in engines:
        console.print(f"\n{engine_flags.NAMES[e]}", highlight=False)
        for p in pools:
            whose = "routed here: a pool of their own" if p["own"] else "the pod's pool"
            console.print(f"  pool {p['name']} ({', '.join(p['domains']) or 'no domain yet'}; {whose}): "
                          f"{p['config'][e]['flags']}", highlight=False, soft_wrap=True)
            for name, text in p["config"][e]["files"].items():
                console.print(f"    {name}: {text}", highlight=False, soft_wrap=True)
        console.print(f"  pod-wide: {table[e]['pod'] or '(not enough data)'}", highlight=False, soft_wrap=True)
        for d in result.domains:
            console.print(f"  {d.domain}: {table[e]['domains'][d.domain] or '(not enough data)'}",
                          highlight=False, soft_wrap=True)
