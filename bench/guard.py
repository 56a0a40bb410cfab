"""Benchmark: ``specwatch guard`` on the full model kit, v1 -> v2 with the current draft.

1. A sample of 200 prompts (the kit's 32 held-out prompts per domain, topped up with windows of its held-out
   text of the same 160-256 bytes), written as the JSON file the command reads.
2. History under the current target: the sample's first ``--history`` prompts per domain decoded with v1 and
   the draft (greedy, K cycling 4, 0, 8, 4, 64 tokens), every step stored in a SQLite store.
3. The guard on all 200 prompts against v2 (models loaded, then timed: history, estimate and verdicts). Goal:
   <= 60 s on this CPU.
4. Live: every prompt decoded for real by the repo's SpeculativeDecoder with v2 and the draft, greedy, K = 4,
   64 tokens (as the demo decodes). Compared like with like: the guard's per-token acceptance against the live
   per-token acceptance (accepted over verified positions: up to and including each step's first rejection,
   the quantity the store's per-position counts and the demo's StaleDraft summary give), and, at K = 4, the
   acceptance rate accepted / drafted that the estimate implies, (a + ... + a^4) / 4, against the live one
   (what the demo's table shows). Goal: |predicted - live| <= 0.05 per domain.

``--model smollm2-135m``: the same on the real pretrained model (agent/pretrained/as_kit.py): its held-out
workload prompts in the chat template (code, edit, extract, chat, json, copy, and logs, the domain its target
v2 changes; no top-up), steps 3 and 4 for target v1 (a no-op update: the gate should flag nothing) and for
target v2 (it should flag logs alone), results in bench/results/guard_<model>.json. ``--targets`` picks them.

Not a test: prints a table and writes bench/results/guard.json.

    python bench/guard.py [--prompts 200] [--history 8] [--threads 1] [--batch-size 64]
    python bench/guard.py --model smollm2-135m --prompts 112 --tokens 32 --history 2 --batch-size 16  # ~15 min
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.decoding.decoder import SpeculativeDecoder  # noqa: E402
from agent.guard import guard  # noqa: E402
from agent.guard.history import current_history  # noqa: E402
from agent.guard.sample import load_sample  # noqa: E402
from agent.kit.evaluate import predicted_acceptance  # noqa: E402
from agent.kit.load import load_kit  # noqa: E402
from agent.pretrained import as_kit  # noqa: E402
from storage import Store  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "guard.json"
LIVE_K = 4


def sample(kit, total: int, seed: int = 0, top_up: bool = True) -> dict[str, list[str]]:
    """``total`` prompts split over the domains: the kit's prompts first, then (``top_up``) held-out windows."""
    rng = random.Random(seed)
    domains = kit.domains
    out = {}
    for i, domain in enumerate(domains):
        want = total // len(domains) + (i < total % len(domains))
        prompts = list(kit.prompts[domain])[:want]
        text = kit.heldout()[domain] if top_up and len(prompts) < want else ""
        while top_up and len(prompts) < want:
            size = rng.randint(160, 256)
            start = rng.randrange(len(text) - size)
            prompts.append(text.encode()[start:start + size].decode("utf-8", errors="ignore"))
        out[domain] = prompts
    return out


def live(decoder: SpeculativeDecoder, prompts: dict[str, list[list[int]]], positions: int,
         new_tokens: int) -> dict[str, dict]:
    out = {}
    for domain, items in prompts.items():
        accepted = verified = drafted = 0
        for ids in items:
            ids = ids[-(positions - new_tokens):]
            for s in decoder.generate(ids, new_tokens, LIVE_K, domain).steps:
                accepted += s.accepted
                drafted += s.lookahead
                verified += s.accepted + (s.accepted < s.lookahead)
        out[domain] = {"prompts": len(items), "accepted": accepted, "verified": verified, "drafted": drafted,
                       "per_token": accepted / verified, "rate": accepted / drafted}
    return out


def history(kit, store: Store, prompts: dict[str, list[list[int]]], per_domain: int, new_tokens: int) -> None:
    decoder = SpeculativeDecoder(kit.target_v1, kit.draft, target_version=kit.versions["target-v1"],
                                 draft_version=kit.versions["draft"])
    store.record_versions(kit.versions["target-v1"], kit.versions["draft"], ts=time.time() - 60)
    cycle = (4, 0, 8, 4)
    for domain, items in prompts.items():
        for i, ids in enumerate(items[:per_domain]):
            gen = decoder.generate(ids[-(decoder.max_positions - new_tokens):], new_tokens, cycle[i % 4], domain)
            store.write_records(gen.steps)
    store.flush(math.inf)


def check(kit, name: str, prompts: dict[str, list[list[int]]], past, read_seconds: float, args, console) -> dict:
    """Guard and live decoding against target ``name`` (v1 or v2) with the kit's draft: the table and figures.
    The guard's time counts ``read_seconds`` (reading the history), as the command's does."""
    target, version = getattr(kit, f"target_{name}"), kit.versions[f"target-{name}"]
    began = time.perf_counter()
    report = guard(target, kit.draft, prompts, past, past.cost, cost_source="history",
                   versions=(version, kit.versions["draft"]), new_tokens=args.tokens, batch_size=args.batch_size)
    guard_seconds = time.perf_counter() - began + read_seconds
    console.print(f"guard ({name}) on {sum(map(len, prompts.values()))} prompts: {guard_seconds:.1f} s",
                  highlight=False)

    began = time.perf_counter()
    measured = live(SpeculativeDecoder(target, kit.draft), prompts, min(
        target.config.max_position_embeddings, kit.draft.config.max_position_embeddings), args.tokens)
    live_seconds = time.perf_counter() - began

    redistill = [d.domain for d in report.domains if d.verdict.verdict == "redistill"]
    table = Table(title=f"guard v1 -> {name}, draft {kit.versions['draft']}: {report.failed or 'no domain'} below "
                        f"break-even, {redistill or 'no domain'} to re-distill; guard {guard_seconds:.1f} s for "
                        f"{sum(map(len, prompts.values()))} prompts")
    for column in ("domain", "prompts", "before (v1)", "predicted", "live", "|diff|", f"pred rate K={LIVE_K}",
                   f"live rate K={LIVE_K}", "|diff| rate", "K", "tok/s ratio", "action"):
        table.add_column(column, justify="left" if column in ("domain", "action") else "right")
    rows = []
    for d in report.domains:
        got = measured[d.domain]
        a = d.estimate.acceptance
        rate = predicted_acceptance(a, LIVE_K)
        row = {"domain": d.domain, "prompts": d.estimate.prompts, "positions": d.estimate.positions,
               "before": d.before, "predicted": a, "live": got["per_token"], "diff": abs(a - got["per_token"]),
               "predicted_rate": rate, "live_rate": got["rate"], "diff_rate": abs(rate - got["rate"]),
               "lookahead": d.verdict.lookahead, "speedup": d.verdict.speedup, "verdict": d.verdict.verdict,
               "action": d.verdict.action, "live_counts": got}
        rows.append(row)
        table.add_row(d.domain, str(row["prompts"]), f"{d.before:.3f}" if d.before is not None else "",
                      f"{a:.3f}", f"{got['per_token']:.3f}", f"{row['diff']:.3f}", f"{rate:.3f}",
                      f"{got['rate']:.3f}", f"{row['diff_rate']:.3f}", str(d.verdict.lookahead),
                      f"{d.verdict.speedup:.2f}", d.verdict.action)
    console.print(table)
    goal = all(r["diff"] <= 0.05 for r in rows)
    console.print(f"per-token |diff| <= 0.05 in every domain: {goal}; guard {guard_seconds:.1f} s <= 60 s: "
                  f"{guard_seconds <= 60}; c {report.cost.ratio:.3f} from history; live decoding "
                  f"{live_seconds:.0f} s", highlight=False)
    return {"target": name, "target_version": version, "guard_seconds": guard_seconds, "live_seconds": live_seconds,
            "within_goal": goal, "cost_ratio": report.cost.ratio, "failed": report.failed, "redistill": redistill,
            "gate_strict": report.gate(strict=True), "rows": rows}


def compare(runs: dict[str, dict], console) -> list[dict] | None:
    """With both targets checked: per domain, what the update does (the guard's own v1 and v2 figures, not the
    history's few prompts) and which domains it newly fails: in v2's gate (strict: below break-even or to
    re-distill) and not in v1's."""
    if not {"v1", "v2"} <= set(runs):
        return None
    v1 = {r["domain"]: r for r in runs["v1"]["rows"]}
    table = Table(title="what v2 changes: the guard's figures under v1 and v2, and the domains the update fails")
    for column in ("domain", "predicted v1", "predicted v2", "change", "relative", "live v1", "live v2", "action v1",
                   "action v2", "failed by the update"):
        table.add_column(column, justify="right" if column.startswith(("pred", "live", "change", "rel")) else "left")
    out = []
    for r in runs["v2"]["rows"]:
        old = v1[r["domain"]]
        newly = r["domain"] in runs["v2"]["gate_strict"] and r["domain"] not in runs["v1"]["gate_strict"]
        out.append({"domain": r["domain"], "predicted_v1": old["predicted"], "predicted_v2": r["predicted"],
                    "change": r["predicted"] - old["predicted"],
                    "relative": r["predicted"] / old["predicted"] - 1 if old["predicted"] else None, "live_v1": old["live"], "live_v2": r["live"],
                    "verdict_v1": old["verdict"], "verdict_v2": r["verdict"], "failed_by_update": newly})
        table.add_row(r["domain"], f"{old['predicted']:.3f}", f"{r['predicted']:.3f}",
                      f"{r['predicted'] - old['predicted']:+.3f}",
                      f"{r['predicted'] / old['predicted'] - 1:+.0%}" if old["predicted"] else "",
                      f"{old['live']:.3f}", f"{r['live']:.3f}",
                      old["action"], r["action"], "yes" if newly else "")
    console.print(table)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="kit",
                        help="kit (the full model kit) or a prepared pretrained model (smollm2-135m)")
    parser.add_argument("--targets", default=None,
                        help="comma-separated targets to check, v1 and/or v2 (default: v2 on the kit, both on a "
                             "pretrained model)")
    parser.add_argument("--prompts", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=64, help="new tokens per prompt (guard and live)")
    parser.add_argument("--history", type=int, default=8, help="prompts per domain decoded under v1 for history")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (1, as the demo: a second one stalls when a process holds the other core)")
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    console = Console(width=150)  # the table is wider than a terminal's 80 columns; a log keeps it whole
    pretrained = args.model != "kit"
    targets = (args.targets or ("v1,v2" if pretrained else "v2")).split(",")
    if not set(targets) <= {"v1", "v2"}:
        parser.error(f"--targets: v1 and/or v2, got {args.targets!r}")
    kit = as_kit.load(args.model) if pretrained else load_kit("full", device="cpu")
    results = RESULTS.with_name(f"guard_{args.model}.json") if pretrained else RESULTS
    work = Path(tempfile.mkdtemp(prefix="guard-bench-"))
    path = work / "sample.json"
    path.write_text(json.dumps(sample(kit, args.prompts, top_up=not pretrained)))
    prompts = load_sample(path, kit.encode)
    url = f"sqlite:///{work / 'history.db'}"

    began = time.perf_counter()
    with Store.open(url, backfill=True) as store:
        history(kit, store, prompts, args.history, args.tokens)
    history_seconds = time.perf_counter() - began
    console.print(f"history under v1: {history_seconds:.1f} s", highlight=False)

    began = time.perf_counter()
    with Store.open(url, migrate_schema=False) as store:
        past = current_history(store, kit.versions["draft"], None, time.time() - 86400, time.time(), 8)
    read_seconds = time.perf_counter() - began
    runs = {name: check(kit, name, prompts, past, read_seconds, args, console) for name in targets}
    changes = compare(runs, console)
    last = runs.get("v2") or runs[targets[-1]]
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps({
        "model": args.model, "prompts": sum(map(len, prompts.values())), "new_tokens": args.tokens,
        "live_lookahead": LIVE_K, "threads": args.threads, "batch_size": args.batch_size,
        "guard_seconds": last["guard_seconds"], "history_seconds": history_seconds,
        "live_seconds": last["live_seconds"], "goal_seconds": 60, "goal_diff": 0.05,
        "within_goal": last["within_goal"], "cost_ratio": last["cost_ratio"], "failed": last["failed"],
        "versions": kit.versions, "target_v2": kit.manifest.get("target_v2"), "rows": last["rows"], "runs": runs,
        "changes": changes,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"python": platform.python_version(), "torch": torch.__version__,
                    "processor": platform.processor() or platform.machine()}}, indent=2))
    console.print(f"wrote {results}", highlight=False)


if __name__ == "__main__":
    main()
