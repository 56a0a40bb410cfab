"""Benchmark: drift detection on the real model behind llama.cpp and the proxy: the delay from a target update to
StaleDraft, and false alarms on a traffic shift alone, on replayed mixed traffic.

Pools of llama-server on SmolLM2-135M-Instruct (Q4_1 as `make real` installs it), each with target v2's LoRA
adapter loaded at scale 0 (agent/demo/real_pools.py: ``off``, ``k3`` the distilled draft, ``k8`` n-gram), and
`specwatch proxy` in front (a child process; alerts evaluated every second, health checks every 0.5 s, its
default policy). Replayed traffic (agent/workload/replay.py, greedy, --concurrency requests at a time) of the
workload's chat, copy and json prompts and the ``logs`` prompts (agent/pretrained/logs.py), held out.

The proxy's policy is by default ``fixed:3+switch``: every domain on the draft pool, the on/off switch free to
turn a domain's speculation off (to ``off``) and on again. On this CPU the draft pool runs at about half the
speed of ``off`` in every domain even under v1 (bench/real_model.py), so the proxy's own policy (``--policy ''``)
moves every domain off it within its first requests, before any update: nothing drafts with the draft, and no
draft can be seen going stale.

- Phase A, v1 only: --phase-a seconds of chat-heavy traffic, then the mix shifts to copy/json-heavy for as long
  again. Every alert raised in phase A is a false alarm (nothing about the models changed).
- The update: every server's adapter switched to scale 1 at once (POST /lora-adapters), the instant recorded.
- Phase B, v2: --phase-b seconds of the copy/json-heavy mix. The delay is from the update to the StaleDraft
  alert's firing time (the proxy's own clock; it includes the proxy's next health check reading the new
  version); its text must name both target versions. Also: when the logs domain's requests left the pool
  they were on before the update.
Goals: StaleDraft within 30 s of replayed traffic after the update, for the logs domain; no alert in phase A.
Not a test: prints a table and writes bench/results/drift_real.json. Run it under the CPU lock.

    python bench/drift_real.py [--repeats 3] [--phase-a 40] [--phase-b 60] [--concurrency 2] [--quick]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.demo.real_pools import POOLS, RealPools  # noqa: E402
from agent.demo.real_proxy import LOGS, ProxyProcess, prompt_sets, send  # noqa: E402
from agent.demo.real_run import names_both  # noqa: E402
from agent.demo.real_story import moved_at, phase_rows  # noqa: E402
from agent.pretrained.prepare import Prepared  # noqa: E402
from agent.workload.mix import schedule  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "drift_real.json"
BEFORE, AFTER = "chat=4,copy=1,json=1,logs=1", "chat=1,copy=3,json=3,logs=1"


def repetition(model: Prepared, args, seed: int, say) -> dict:
    """One run: fresh servers (n-gram memory, adapter off), a fresh proxy and database."""
    work = Path(tempfile.mkdtemp(prefix="drift-real-"))
    sets = prompt_sets(("chat", "copy", "json", LOGS))
    out: dict = {"seed": seed, "work": str(work)}
    with RealPools(model, work) as pools:
        proxy = ProxyProcess(pools.urls(), f"sqlite:///{work / 'proxy.db'}", work / "proxy.log",
                             options=pools.proxy_options(), pod=f"drift-real-{seed}", policy=args.policy)
        try:
            proxy.wait_ready(len(pools.servers))
            began = time.time()
            say(f"  rep {seed}: phase A ({2 * args.phase_a:.0f} s, mix shift at {args.phase_a:.0f} s)")
            a = send(proxy.url, schedule(BEFORE, [f"{args.phase_a}s:{AFTER}"]), sets, 2 * args.phase_a,
                     concurrency=args.concurrency, tokens=args.tokens, seed=seed * 10)
            versions = {p["name"]: p["target_version"] for p in proxy.pools()}
            updated = pools.set_adapter(1.0)
            say(f"  rep {seed}: update at {updated - began:.1f} s; phase B ({args.phase_b:.0f} s)")
            b_began = time.time()
            b = send(proxy.url, schedule(AFTER), sets, args.phase_b, concurrency=args.concurrency,
                     tokens=args.tokens, seed=seed * 10 + 1)
            time.sleep(2 * 1.0)  # one more alert evaluation for the last records
            alerts = proxy.alerts()
            new_versions = {p["name"]: p["target_version"] for p in proxy.pools()}
        finally:
            proxy.stop()
    out.update(began=began, updated=updated, phase_b_began=b_began, versions_v1=versions, versions_v2=new_versions,
               phase_a=[r.__dict__ for r in a.results], phase_b=[r.__dict__ for r in b.results], alerts=alerts)
    return judge(out)


def judge(run: dict) -> dict:
    """False alarms (alerts starting before the update), StaleDraft's delay and text, when logs moved."""
    updated = run["updated"]
    false = [a for a in run["alerts"] if a["starts_at"] < updated]
    stale = sorted((a for a in run["alerts"] if a["labels"]["alertname"] == "StaleDraft"
                    and a["starts_at"] >= updated), key=lambda a: a["starts_at"])
    first = stale[0] if stale else None
    moved = moved_at(run["phase_a"], run["phase_b"], LOGS)
    run["summary"] = {
        "false_alarms": [f"{a['labels']['alertname']} {a['labels'].get('domain', '')}" for a in false],
        "stale_domain": first["labels"].get("domain") if first else None,
        "stale_delay": first["starts_at"] - updated if first else None,
        "stale_names_both": bool(first) and names_both(first, run["versions_v1"], run["versions_v2"]),
        "stale_summary": first["annotations"].get("summary") if first else None,
        "other_alerts_after": [f"{a['labels']['alertname']} {a['labels'].get('domain', '')} "
                               f"+{a['starts_at'] - updated:.1f}s" for a in run["alerts"]
                               if a["starts_at"] >= updated and a is not first],
        "logs_moved": moved,
        "rows": phase_rows({"A (v1)": run["phase_a"], "B (v2)": run["phase_b"]}),
    }
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--phase-a", type=float, default=40.0, help="seconds of each mix before the update")
    parser.add_argument("--phase-b", type=float, default=60.0, help="seconds of traffic after the update")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--policy", default="fixed:3+switch",
                        help="the proxy's policy (default: pinned to the draft pool k3, the switch free to turn a "
                             "domain off; '' for the proxy's own)")
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--quick", action="store_true", help="one repetition, 20 s + 20 s, 40 s")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.phase_a, args.phase_b = 1, 20.0, 40.0
    model = Prepared.read("smollm2-135m")
    say = lambda text: print(text, file=sys.stderr)  # noqa: E731
    runs = []
    for seed in range(args.repeats):
        runs.append(repetition(model, args, seed, say))
        write(args, model, runs)
    report(runs, args.policy or "the proxy's default")


def write(args, model: Prepared, runs: list[dict]) -> None:
    delays = [r["summary"]["stale_delay"] for r in runs if r["summary"]["stale_delay"] is not None]
    out = {"model": model.name, "adapter": str(model.lora_gguf), "pools": POOLS, "policy": args.policy or "default", "mix_before": BEFORE,
           "mix_after": AFTER, "phase_a_seconds": 2 * args.phase_a, "phase_b_seconds": args.phase_b,
           "concurrency": args.concurrency, "tokens": args.tokens, "machine": platform.machine(),
           "repeats": len(runs), "detected": len(delays),
           "delay_median": statistics.median(delays) if delays else None, "delay_max": max(delays, default=None),
           "false_alarms": sum(len(r["summary"]["false_alarms"]) for r in runs), "runs": runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")


def report(runs: list[dict], policy: str) -> None:
    console = Console(width=200)
    table = Table(title=f"drift on the real model: StaleDraft after the update, false alarms on the traffic shift "
                        f"(policy {policy})")
    for col in ("rep", "false alarms (phase A)", "StaleDraft domain", "delay s", "names v1 and v2",
                "logs left its pool", "other alerts after the update"):
        table.add_column(col)
    for r in runs:
        s = r["summary"]
        m = s["logs_moved"]
        table.add_row(str(r["seed"]), ", ".join(s["false_alarms"]) or "none", s["stale_domain"] or "not fired",
                      "" if s["stale_delay"] is None else f"{s['stale_delay']:.1f}", "yes" if s["stale_names_both"]
                      else "no", f"{m['from']} -> {m['to']} at +{m['seconds']:.1f}s" if m else "no",
                      "; ".join(s["other_alerts_after"]) or "none")
    console.print(table)
    for r in runs:
        if r["summary"]["stale_summary"]:
            console.print(f"rep {r['seed']} StaleDraft: {r['summary']['stale_summary']}", highlight=False)
    rows = Table(title="per phase and domain (all repetitions): requests, pools used, acceptance, tok/s")
    for col in ("rep", "phase", "domain", "requests", "pools", "acceptance", "tok/s"):
        rows.add_column(col)
    for r in runs:
        for row in r["summary"]["rows"]:
            rows.add_row(str(r["seed"]), row["phase"], row["domain"], str(row["requests"]), row["pools"],
                         "" if row["acceptance"] is None else f"{row['acceptance']:.0%}", f"{row['tps']:.1f}")
    console.print(rows)


if __name__ == "__main__":
    main()
