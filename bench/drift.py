"""Benchmark: detection delay and false alarms of the drift detectors, on iid streams and real model-kit
acceptance traces.

Delays and intervals count draft tokens that were verified (positions up to and including the first
rejection of a step), the observations the detectors see. Change runs: a warm-up plus 1000-4000 tokens at
the old acceptance, then up to ``--horizon`` tokens at the new one; median and 90th percentile delay of
the first alarm after the change, misses (none within the horizon), false alarms per 1M tokens before the
change. Version-blind detectors (cusum, expected-cusum, adwin) run on the stream; stale-draft runs the
DriftWatch on StepRecords whose target version changes at the change point (it is told of the change).
Stationary runs: >= ``--stationary`` tokens per source and domain, false alarms per 1M tokens (detectors
re-baseline after each alarm and go on). Real streams resample whole requests with replacement (a block
bootstrap over prompts: correlation inside a request is kept).

Goals: 0.7 -> 0.35 (iid) caught in <= 60 tokens median (cusum); <= 1 false alarm per 1M tokens on
stationary real traces (every detector). Not a test: prints tables, writes bench/results/drift.json.

    python bench/drift.py [--runs 200] [--stationary 1000000] [--horizon 4000] [--lookahead 4]
                          [--extra-lookaheads 2,8] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from alerts.detectors import ADWINDetector, BernoulliCUSUM, ExpectedCUSUM  # noqa: E402
from alerts.watch import DriftWatch, WatchConfig  # noqa: E402
from bench.drift_sources import (acceptance, bootstrap, concentration, counted, iid_steps,  # noqa: E402
                                 load_greedy, load_sampled)
from specwatch_core.records import StepRecord  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "drift.json"
BLIND = ("cusum", "expected-cusum", "adwin")
DETECTORS = BLIND + ("stale-draft",)
IID = ((0.7, 0.35), (0.7, 0.55), (0.5, 0.3))
GOAL_DELAY, GOAL_FA = 60, 1.0


def make(kind: str, config: WatchConfig):
    return {"cusum": lambda: BernoulliCUSUM(config.cusum), "expected-cusum": lambda: ExpectedCUSUM(config.expected),
            "adwin": lambda: ADWINDetector(config.adwin)}[kind]()


def alarm_positions(kind: str, steps, config: WatchConfig) -> list[int]:
    """Token positions (count of verified tokens so far) at which the detector confirmed a drop."""
    detector, out, pos = make(kind, config), [], 0
    if kind == "expected-cusum":
        for a, r, values in steps:
            pos += a + r
            if values and detector.update_many(values).drift_detected:
                out.append(pos)
    else:
        for a, r, _ in steps:
            pos += a + r
            if detector.update_step(a, r).drift_detected:
                out.append(pos)
    return out


def records(steps, target: str):
    for a, r, values in steps:
        yield StepRecord(domain="d", lookahead=a + r, accepted=a, emitted=a + 1, draft_seconds=0.0,
                         verify_seconds=0.0, target_version=target, draft_version="draft",
                         expected_acceptance=list(values) if values else None)


def stale_delay(pre, post, config: WatchConfig, horizon: int) -> tuple[int | None, str | None]:
    """Tokens after the version change to a StaleDraft finding (None: none), and the test's decision."""
    watch = DriftWatch(config)
    for record in records(pre, "v1"):
        watch.observe(record)
    pos = 0
    for record in records(post, "v2"):
        pos += record.accepted + (record.accepted < record.lookahead)
        if any(f.alertname == "StaleDraft" for f in watch.observe(record)):
            return pos, "drop"
        test = watch.version_test("d")
        if pos > horizon or (test is not None and test.decision is not None):
            break
    test = watch.version_test("d")
    return None, test.decision if test is not None else None


def change_runs(name: str, pre_source, post_source, kinds, runs: int, horizon: int, seed: int,
                config: WatchConfig) -> dict:
    """Per detector: delays, misses, false alarms before the change and the tokens they came in."""
    tallies = {k: {"delays": [], "misses": 0, "false_alarms": 0, "pre_tokens": 0} for k in kinds}
    if "stale-draft" in tallies:
        tallies["stale-draft"]["no_drop"] = 0
    for run in range(runs):
        rng = random.Random(f"{seed}:{name}:{run}")
        pre = pre_source(rng, config.cusum.warmup + rng.randint(1000, 4000))
        post = post_source(rng, horizon)
        change = counted(pre)
        for kind in kinds:
            t = tallies[kind]
            if kind == "stale-draft":
                delay, decision = stale_delay(pre, post, config, horizon)
                t["no_drop"] += decision == "no drop"
            else:
                positions = alarm_positions(kind, pre + post, config)
                t["false_alarms"] += sum(p <= change for p in positions)
                t["pre_tokens"] += change
                after = [p - change for p in positions if p > change]
                delay = after[0] if after and after[0] <= horizon else None
            if delay is None:
                t["misses"] += 1
            else:
                t["delays"].append(delay)
    return {k: summarise(t, runs) for k, t in tallies.items()}


def summarise(t: dict, runs: int) -> dict:
    d = sorted(t["delays"])
    out = {"runs": runs, "detected": len(d), "misses": t["misses"],
           "median_delay": statistics.median(d) if d else None,
           "p90_delay": d[min(int(0.9 * len(d)), len(d) - 1)] if d else None}
    if t["pre_tokens"]:
        out["false_alarms"] = t["false_alarms"]
        out["false_alarms_per_1m"] = t["false_alarms"] / t["pre_tokens"] * 1e6
    if "no_drop" in t:
        out["concluded_no_drop"] = t["no_drop"]
    return out


def stationary_runs(requests, kinds, tokens: int, seed: str, config: WatchConfig) -> dict:
    steps = bootstrap(requests, tokens, random.Random(seed))
    n = counted(steps)
    out = {"tokens": n, "acceptance": acceptance(steps)}
    for kind in kinds:
        alarms = len(alarm_positions(kind, steps, config))
        out[kind] = {"false_alarms": alarms, "false_alarms_per_1m": alarms / n * 1e6}
    return out


def observe_cost(config: WatchConfig, lookahead: int, repeats: int = 5, n: int = 20_000) -> dict:
    """Microseconds per DriftWatch.observe at acceptance 0.8 after warm-up, best of ``repeats`` (the
    least disturbed by other load), with and without expected acceptance in the records."""
    out = {}
    for label, with_values in (("with expected acceptance", True), ("flags only", False)):
        steps = iid_steps(0.8, 2 * n * lookahead, random.Random(7), lookahead)
        recs = [StepRecord(domain="d", lookahead=lookahead, accepted=a, emitted=a + 1, draft_seconds=0.001,
                           verify_seconds=0.01, target_version="v1", draft_version="draft",
                           expected_acceptance=(list(v) + [0.0] * (lookahead - len(v))) if with_values else None)
                for a, _, v in steps]
        best = float("inf")
        for _ in range(repeats):
            watch = DriftWatch(config)
            for r in recs[:n]:  # warm-ups done
                watch.observe(r)
            started = time.process_time()
            for r in recs[n:]:
                watch.observe(r)
            best = min(best, (time.process_time() - started) / len(recs[n:]) * 1e6)
        out[label] = round(best, 2)
    return out


def cell(row: dict | None) -> str:
    if row is None:
        return "n/a"
    if not row["detected"]:
        text = f"none of {row['runs']}"
    else:
        text = f"{row['median_delay']:.0f} / {row['p90_delay']:.0f}"
        if row["misses"]:
            text += f", {row['misses']} missed"
    if "concluded_no_drop" in row:
        text += f" ({row['concluded_no_drop']} no drop)"
    if "false_alarms_per_1m" in row:
        text += f" | {row['false_alarms_per_1m']:.1f}/1M"
    return text


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--stationary", type=int, default=1_000_000, help="tokens per stationary stream")
    parser.add_argument("--horizon", type=int, default=4000, help="tokens after a change before a miss")
    parser.add_argument("--lookahead", type=int, default=4, help="lookahead of the greedy and iid streams")
    parser.add_argument("--extra-lookaheads", type=lambda v: [int(x) for x in v.split(",") if x], default=[2, 8],
                        help="more lookaheads for the stationary greedy streams (comma-separated)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    console, config, started = Console(width=150), WatchConfig(), time.time()
    greedy = load_greedy(args.lookahead)
    sampled = load_sampled()
    kappa = 4.0
    if sampled is not None:
        kappa = concentration([r for reqs in sampled[0]["target-v1"].values() for r in reqs])
    else:
        console.print("[yellow]no sampled traces (bench/drift_traces.py): expected-cusum runs on iid only[/]")
    k = args.lookahead
    console.print("Real streams resample whole requests with replacement (a seeded block bootstrap over prompts): "
                  "flags stay correlated inside a request. Tokens: verified draft tokens.")
    scenarios = {}
    for p0, p1 in IID:
        scenarios[f"iid {p0} -> {p1}"] = (lambda rng, n, p=p0: iid_steps(p, n, rng, k, kappa),
                                          lambda rng, n, p=p1: iid_steps(p, n, rng, k, kappa), DETECTORS)
    sources = {"greedy": (greedy, ("cusum", "adwin", "stale-draft"))}
    if sampled is not None:
        sources["sampled"] = (sampled[0], DETECTORS)
    for source, (traces, kinds) in sources.items():
        for domain in traces["target-v1"]:
            v1, v2 = traces["target-v1"][domain], traces["target-v2"][domain]
            scenarios[f"{source} {domain} v1 -> v2"] = (lambda rng, n, r=v1: bootstrap(r, n, rng),
                                                        lambda rng, n, r=v2: bootstrap(r, n, rng), kinds)
    changes = {}
    for name, (pre, post, kinds) in scenarios.items():
        console.print(f"change runs: {name}")
        changes[name] = change_runs(name, pre, post, kinds, args.runs, args.horizon, args.seed, config)
    stationary = {}
    streams = [(f"{source} K={k}", traces, kinds) for source, (traces, kinds) in sources.items()]
    # greedy traces replay any lookahead: the others too (short steps and long ones correlate differently)
    streams += [(f"greedy K={extra}", load_greedy(extra), sources["greedy"][1])
                for extra in args.extra_lookaheads if extra != k]
    for label, traces, kinds in streams:
        for target in ("target-v1", "target-v2"):
            for domain, requests in traces[target].items():
                name = f"{label} {domain} {target[-2:]}"
                console.print(f"stationary: {name}")
                stationary[name] = stationary_runs(requests, [x for x in kinds if x in BLIND], args.stationary,
                                                   f"{args.seed}:{name}", config)
    goals = judge(changes, stationary)
    cost = observe_cost(config, k)
    report(console, changes, stationary, goals)
    console.print(f"DriftWatch.observe cost, lookahead {k} (best of 5, CPU time): "
                  + ", ".join(f"{v:.1f} us/record {label}" for label, v in cost.items()))
    meta = {"runs": args.runs, "stationary_tokens": args.stationary, "horizon": args.horizon, "lookahead": k,
            "seed": args.seed, "iid_beta_concentration": round(kappa, 3), "seconds": round(time.time() - started),
            "config": repr(config), "sampled_traces": sampled[1] if sampled else None,
            "note": ("tokens: verified draft tokens (up to and including the first rejection of a step); real "
                     "streams: whole requests resampled with replacement (block bootstrap over prompts, "
                     "seeded), keeping the correlation of flags inside a request")}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"benchmark": "drift", "meta": meta, "changes": changes,
                                    "stationary": stationary, "goals": goals, "observe_us": cost}, indent=1) + "\n")
    console.print(f"wrote {args.out}")
    return 0


def judge(changes: dict, stationary: dict) -> dict:
    delay = changes["iid 0.7 -> 0.35"]["cusum"]["median_delay"]
    worst = max((row[k]["false_alarms_per_1m"], f"{k} on {name}") for name, row in stationary.items()
                for k in BLIND if k in row and not name.startswith("iid"))
    return {"delay_0.7_to_0.35_cusum": {"goal": GOAL_DELAY, "value": delay, "met": delay is not None and
                                        delay <= GOAL_DELAY},
            "false_alarms_per_1m_real_stationary": {"goal": GOAL_FA, "worst": worst[0], "where": worst[1],
                                                    "met": worst[0] <= GOAL_FA}}


def report(console: Console, changes: dict, stationary: dict, goals: dict) -> None:
    table = Table(title="Detection delay after a change: median / p90 tokens, misses | false alarms per 1M "
                        "tokens before the change")
    table.add_column("scenario")
    for kind in DETECTORS:
        table.add_column(kind)
    for name, rows in changes.items():
        table.add_row(name, *[cell(rows.get(kind)) for kind in DETECTORS])
    console.print(table)
    table = Table(title="Stationary streams: false alarms per 1M tokens (count)")
    for column in ("stream", "tokens", "acceptance") + BLIND:
        table.add_column(column)
    for name, row in stationary.items():
        table.add_row(name, f"{row['tokens']:,}", f"{row['acceptance']:.3f}",
                      *[f"{row[k]['false_alarms_per_1m']:.2f} ({row[k]['false_alarms']})" if k in row else "n/a"
                        for k in BLIND])
    totals = []
    for k in BLIND:
        rows = [row for row in stationary.values() if k in row]
        tokens, alarms = sum(r["tokens"] for r in rows), sum(r[k]["false_alarms"] for r in rows)
        totals.append(f"{alarms / tokens * 1e6:.2f} ({alarms} in {tokens / 1e6:.1f}M)" if tokens else "n/a")
    table.add_row("all real streams", "", "", *totals, style="bold")
    console.print(table)
    d, f = goals["delay_0.7_to_0.35_cusum"], goals["false_alarms_per_1m_real_stationary"]
    console.print(f"goal: iid 0.7 -> 0.35 caught in <= {d['goal']} tokens (median, cusum): {d['value']} -> "
                  f"{'met' if d['met'] else 'NOT met'}")
    console.print(f"goal: <= {f['goal']:.0f} false alarm per 1M tokens on stationary real traces: worst "
                  f"{f['worst']:.2f} ({f['where']}) -> {'met' if f['met'] else 'NOT met'}")


if __name__ == "__main__":
    sys.exit(main())
