"""Benchmark: transformers' assisted generation with its own lookahead control against the same loop steered
by specwatch, on the full model kit's mixed stream with the target update.

The stream is the demo's (agent/demo/run.py ``phase_requests``): code, prose and logs requests drawn by
weight; phase 1 with target v1 and its distilled draft, phase 2 with target v2 and the same draft (now stale
on logs). Every request runs in every arm, in an order rotated per request, so the machine's load hits all
arms alike; greedy, torch on one thread, tokens/s = tokens / wall seconds of generate (prefill included).

Arms (each with its own copy of the draft, since transformers keeps the heuristic's K on the draft's
generation config across calls):
- ``target only``: ``generate()`` without a draft (the reference for speed-ups);
- ``hf default``: ``generate(assistant_model=draft)`` as transformers 5 ships it: 20 tokens a step (constant),
  drafting stopped below a confidence threshold of 0.4 that it re-fits on a ROC curve;
- ``hf heuristic``: the +2/-1 schedule (``num_assistant_tokens_schedule="heuristic"``, kept across calls, from
  20), no confidence stop;
- ``specwatch``: ``specwatch_generate`` with a sidecar built as ``specwatch serve`` builds it (store,
  ``--policy``, drift watch, alerts, flush and refit jobs), in-process, records fed inline (``--ingest``).
  ``--kmax`` 32 rather than the sidecar's default 8: transformers' heuristic is unbounded and grows past 20
  tokens a step on code, where this draft is accepted 98% of the time; the policy chooses below the cap.

Goals: specwatch >= +10% tokens/s over transformers' heuristic on the mixed stream, never more than 3% below
it in any phase, and speculation switched off on the stale domain (logs on v2). Not a test: prints tables
and writes bench/results/hf_generate.json.

    python bench/hf_generate.py [--quick] [--requests 90,130] [--tokens 64] [--policy NAME] [--kmax 32]
                                [--ingest inline|background]
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import random
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch
import transformers
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.demo.plan import DemoPlan  # noqa: E402
from agent.demo.run import phase_requests  # noqa: E402
from agent.hf import in_process, specwatch_generate  # noqa: E402
from agent.kit.load import load_kit  # noqa: E402
from agent.runtime import config as sidecar_config  # noqa: E402
from bench.decoder import timed  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "hf_generate.json"
ARMS = ("target only", "hf default", "hf heuristic", "specwatch")
PHASES = ("v1", "v2 (draft stale on logs)")
BASELINE = "hf heuristic"
GOAL_GAIN, GOAL_FLOOR = 0.10, -0.03


def drafts(draft) -> dict[str, torch.nn.Module]:
    """One copy of the draft per arm; the baselines' settings on their own generation configs."""
    default, heuristic, steered = (copy.deepcopy(draft) for _ in range(3))
    heuristic.generation_config.num_assistant_tokens_schedule = "heuristic"
    heuristic.generation_config.num_assistant_tokens = 20
    heuristic.generation_config.assistant_confidence_threshold = 0.0
    return {"hf default": default, "hf heuristic": heuristic, "specwatch": steered}


def run_arm(arm, target, draft, sidecar, domain, ids, tokens, steps) -> tuple[float, torch.Tensor]:
    x = torch.tensor([ids])
    kwargs = dict(input_ids=x, max_new_tokens=tokens, do_sample=False)
    if arm == "target only":
        return timed(lambda: target.generate(**kwargs))
    if arm == "specwatch":
        return timed(lambda: specwatch_generate(target, draft, sidecar, domain, on_step=steps.append, **kwargs))
    return timed(lambda: target.generate(assistant_model=draft, **kwargs))


class Totals:
    """Tokens and seconds per (arm, phase, domain); specwatch's steps per (phase, domain)."""

    def __init__(self):
        self.tokens, self.seconds = defaultdict(int), defaultdict(float)
        self.steps, self.plain, self.drafted = defaultdict(int), defaultdict(int), defaultdict(int)

    def add(self, arm, phase, domain, tokens, seconds) -> None:
        for key in ((arm, phase, domain), (arm, phase, "all"), (arm, "stream", "all")):
            self.tokens[key] += tokens
            self.seconds[key] += seconds

    def add_steps(self, phase, domain, steps, tokens: int) -> None:
        """``plain`` counts K = 0 steps but the one the budget forces (a last token has no room for a draft)."""
        done = 0
        for s in steps:
            self.steps[phase, domain] += 1
            self.plain[phase, domain] += s.lookahead == 0 and done < tokens - 1
            self.drafted[phase, domain] += s.lookahead
            done += s.emitted

    def tps(self, arm, phase, domain="all") -> float | None:
        seconds = self.seconds.get((arm, phase, domain))
        return self.tokens[arm, phase, domain] / seconds if seconds else None


def bench(kit, plan: DemoPlan, tokens: int, policy: str, kmax: int, console: Console) -> dict:
    """The stream through every arm; ``plan.background`` says where the sidecar's record work runs."""
    rng = random.Random(plan.seed)
    copies = drafts(kit.draft)
    totals, mismatches, order = Totals(), 0, list(ARMS)
    with tempfile.TemporaryDirectory() as tmp:
        runtime = in_process(db=f"sqlite:///{tmp}/bench.db", pod="bench-hf", policy=policy, kmax=kmax,
                             seed=plan.seed, alerts_seconds=1.0, background=plan.background)
        sidecar = runtime.sidecar
        try:
            warm = kit.prompt_ids("code")[0]
            for arm in ARMS:  # first calls pay one-off costs (allocations, lazy imports)
                run_arm(arm, kit.target_v1, copies.get(arm), sidecar, "warm-up", warm, 8, [])
            for phase, target in enumerate((kit.target_v1, kit.target_v2)):
                requests = phase_requests(plan, kit, phase, rng)
                console.print(f"[bold]{PHASES[phase]}[/]: {len(requests)} requests x {len(ARMS)} arms ...")
                for i, (domain, ids) in enumerate(requests):
                    n = min(tokens, target.config.max_position_embeddings - len(ids))
                    outputs = {}
                    for arm in order[i % len(ARMS):] + order[: i % len(ARMS)]:
                        steps = []
                        seconds, out = run_arm(arm, target, copies.get(arm), sidecar, domain, ids, n, steps)
                        outputs[arm] = out
                        totals.add(arm, PHASES[phase], domain, out.shape[1] - len(ids), seconds)
                        if arm == "specwatch":
                            totals.add_steps(PHASES[phase], domain, steps, n)
                    mismatches += any(not torch.equal(o, outputs["target only"]) for o in outputs.values())
            sidecar.flush()
            switch = sidecar.switch
            states = {d: (switch.is_on(d), switch.reason(d)) if switch is not None else (True, "no switch")
                      for d in kit.domains}
            alerts = [(a.labels["alertname"], a.labels.get("domain", "")) for a in sidecar.alerts.alerts("all")]
        finally:
            runtime.close()
    return report(kit, totals, mismatches, states, alerts)


def report(kit, totals: Totals, mismatches: int, states: dict, alerts: list) -> dict:
    rows = []
    for phase in PHASES + ("stream",):
        for domain in (kit.domains + ["all"]) if phase != "stream" else ["all"]:
            row = dict(phase=phase, domain=domain, **{arm: totals.tps(arm, phase, domain) for arm in ARMS})
            base = row[BASELINE]
            row["vs_heuristic"] = row["specwatch"] / base - 1 if base else None
            row["vs_default"] = row["specwatch"] / row["hf default"] - 1 if row["hf default"] else None
            if phase != "stream" and domain != "all":
                steps = totals.steps[phase, domain]
                row["plain_share"] = totals.plain[phase, domain] / steps if steps else None
                row["mean_k"] = totals.drafted[phase, domain] / steps if steps else None
            rows.append(row)
    phase_gains = {r["phase"]: r["vs_heuristic"] for r in rows if r["domain"] == "all" and r["phase"] != "stream"}
    stream = next(r for r in rows if r["phase"] == "stream")
    stale_off = not states["logs"][0]
    goals = dict(stream_gain=stream["vs_heuristic"] >= GOAL_GAIN,
                 no_phase_below=all(g >= GOAL_FLOOR for g in phase_gains.values()), stale_switched_off=stale_off)
    return dict(rows=rows, goals=goals, mismatched_requests=mismatches, alerts=alerts,
                switch={d: dict(on=on, reason=reason) for d, (on, reason) in states.items()})


def fmt(x, pct=False) -> str:
    return "" if x is None else (f"{x:+.1%}" if pct else f"{x:.1f}")


def print_tables(console: Console, result: dict) -> None:
    t = Table(title="tokens/s (greedy, one thread); specwatch against transformers' heuristic and default")
    for col in ("phase", "domain", *ARMS, "vs heuristic", "vs default", "K=0 steps", "mean K"):
        t.add_column(col, justify="right")
    for r in result["rows"]:
        t.add_row(r["phase"], r["domain"], *(fmt(r[a]) for a in ARMS), fmt(r["vs_heuristic"], True),
                  fmt(r["vs_default"], True), "" if r.get("plain_share") is None else f"{r['plain_share']:.0%}",
                  "" if r.get("mean_k") is None else f"{r['mean_k']:.1f}")
    console.print(t)
    for domain, s in result["switch"].items():
        console.print(f"switch {domain}: {'on' if s['on'] else 'OFF'} ({s['reason']})")
    console.print(f"alerts: {result['alerts']}; requests whose outputs differed between arms: "
                  f"{result['mismatched_requests']}")
    g = result["goals"]
    console.print(f"goals: stream >= +{GOAL_GAIN:.0%}: {'yes' if g['stream_gain'] else 'NO'}; no phase below "
                  f"{GOAL_FLOOR:.0%}: {'yes' if g['no_phase_below'] else 'NO'}; stale domain off: "
                  f"{'yes' if g['stale_switched_off'] else 'NO'}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="full")
    parser.add_argument("--quick", action="store_true", help="30 + 40 requests (about a minute; the full run about 3)")
    parser.add_argument("--requests", default="90,130", help="requests of phase 1 and 2 (the demo's)")
    parser.add_argument("--tokens", type=int, default=64, help="new tokens per request")
    parser.add_argument("--policy", default=sidecar_config.SidecarConfig.policy)
    parser.add_argument("--kmax", type=int, default=32, help="the policy's largest K (module docstring)")
    parser.add_argument("--ingest", choices=("inline", "background"), default="inline",
                        help="where the sidecar's record work runs (the decoding thread, or its ingest worker)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    first, second = (30, 40) if args.quick else (int(n) for n in args.requests.split(","))
    plan = DemoPlan(requests=(first, second, 1), seed=args.seed, background=args.ingest == "background")
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    console = Console(width=160)
    kit = load_kit(args.size, device="cpu")
    started = time.perf_counter()
    result = bench(kit, plan, args.tokens, args.policy, args.kmax, console)
    print_tables(console, result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(dict(
        benchmark="hf_generate", size=args.size, requests=[first, second], tokens=args.tokens, policy=args.policy,
        kmax=args.kmax, ingest=args.ingest, seed=args.seed, mix=list(map(list, plan.mix)), transformers=transformers.__version__,
        torch=torch.__version__, threads=torch.get_num_threads(), machine=platform.machine(),
        seconds=round(time.perf_counter() - started, 1), versions=kit.versions,
        when=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **result), indent=2))
    console.print(f"wrote {args.out} in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
