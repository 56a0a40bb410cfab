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

``--model smollm2-135m``: the real pretrained model (``specwatch models pretrained``, agent/pretrained/):
target v1 its transformers checkpoint (float32), the distilled draft (its transformers checkpoint), target v2
v1 with the LoRA adapter merged (agent/pretrained/target_v2.py ``load_v2``: it answers ``logs`` in a new
format, so the draft is stale there), through agent/pretrained/as_kit.py. The stream: the workload's held-out
prompts (code, edit, extract, chat, json, copy and ``logs``), put through the model's chat template, domains drawn by ``--mix`` weights (default: all alike). Two more arms:
- ``hf lookup``: transformers' prompt lookup (``prompt_lookup_num_tokens=10``, its generator's default N;
  n-grams up to 2, its default), no draft model;
- ``specwatch lookup``: the same prompt lookup with its cap chosen by a second sidecar of its own
  (``specwatch_generate(..., prompt_lookup=True)``). agent/hf steers one candidate kind per call (the caller
  picks the draft model or prompt lookup; the sidecar picks K, K = 0 being no speculation): nothing in it
  chooses between the kinds per domain, so each kind is its own arm.
Goal there: specwatch >= +10% tokens/s over transformers' best built-in option on the stream (the best of
default, heuristic and prompt lookup over the whole stream, as an operator would fix one); rows say it per
phase and domain, also against each row's best. Results to bench/results/hf_generate_smollm2-135m.json.

    python bench/hf_generate.py [--quick] [--requests 90,130] [--tokens 64] [--policy NAME] [--kmax 32]
                                [--ingest inline|background]
    python bench/hf_generate.py --model smollm2-135m [--quick] [--requests 30,30] [--tokens 48] [--mix code=1,...]
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

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
KIT_ARMS = ("target only", "hf default", "hf heuristic", "specwatch")
REAL_ARMS = ("target only", "hf default", "hf heuristic", "hf lookup", "specwatch", "specwatch lookup")
BUILT_IN = ("hf default", "hf heuristic", "hf lookup")
STEERED = ("specwatch", "specwatch lookup")  # each with a sidecar of its own
PHASES = ("v1", "v2 (draft stale on logs)")
BASELINE = "hf heuristic"
GOAL_GAIN, GOAL_FLOOR = 0.10, -0.03
LOOKUP_TOKENS = 10  # transformers' PromptLookupCandidateGenerator's default num_output_tokens
LOOKUP = "+lookup"  # the sidecar's domain label of prompt lookup's requests: <domain>+lookup


def label(arm: str, domain: str) -> str:
    return domain + LOOKUP if arm == "specwatch lookup" else domain


@dataclass
class Setup:
    """What a run decodes: the two targets, the draft, the domains and each phase's (domain, prompt ids)."""

    name: str
    target_v1: torch.nn.Module
    target_v2: torch.nn.Module
    draft: torch.nn.Module
    domains: list[str]
    requests: Callable[[int, random.Random], list[tuple[str, list[int]]]]
    warm: list[int]
    versions: dict[str, str]
    arms: tuple[str, ...]
    mix: list[tuple[str, float]] = field(default_factory=list)


def kit_setup(size: str, plan: DemoPlan) -> Setup:
    kit = load_kit(size, device="cpu")
    return Setup(size, kit.target_v1, kit.target_v2, kit.draft, kit.domains,
                 lambda phase, rng: phase_requests(plan, kit, phase, rng), kit.prompt_ids("code")[0],
                 kit.versions, KIT_ARMS, list(plan.mix))


def real_setup(name: str, counts: tuple[int, int], mix: str | None) -> Setup:
    """The pretrained model (module docstring) in the kit's shape (agent/pretrained/as_kit.py): held-out prompts
    of every workload domain, ``logs`` among them."""
    from agent.pretrained import as_kit
    from agent.workload.mix import parse_mix

    try:
        kit = as_kit.load(name)
    except FileNotFoundError as exc:
        raise SystemExit(f"{exc} (target v2 too: specwatch models pretrained --name {name} --lora-v2)") from exc
    weights = list(parse_mix(mix).weights) if mix else [(d, 1.0) for d in kit.domains]
    unknown = [d for d, _ in weights if d not in kit.prompts]
    if unknown:
        raise SystemExit(f"--mix: no held-out prompts for {', '.join(unknown)} (there are: {', '.join(kit.domains)})")

    def requests(phase: int, rng: random.Random) -> list[tuple[str, list[int]]]:
        names, w = zip(*weights)
        return [(d, kit.encode(rng.choice(kit.prompts[d]))) for d in rng.choices(names, w, k=counts[phase])]

    return Setup(name, kit.target_v1, kit.target_v2, kit.draft, [d for d, _ in weights], requests,
                 kit.prompt_ids("chat")[0], kit.versions, REAL_ARMS, weights)


def drafts(draft, arms) -> dict[str, torch.nn.Module]:
    """One copy of the draft per arm that drafts with it; the baselines' settings on their own generation
    configs."""
    copies = {arm: copy.deepcopy(draft) for arm in ("hf default", "hf heuristic", "specwatch") if arm in arms}
    heuristic = copies["hf heuristic"]
    heuristic.generation_config.num_assistant_tokens_schedule = "heuristic"
    heuristic.generation_config.num_assistant_tokens = 20
    heuristic.generation_config.assistant_confidence_threshold = 0.0
    return copies


def run_arm(arm, target, draft, sidecar, domain, ids, tokens, steps) -> tuple[float, torch.Tensor]:
    x = torch.tensor([ids])
    kwargs = dict(input_ids=x, max_new_tokens=tokens, do_sample=False)
    if arm == "target only":
        return timed(lambda: target.generate(**kwargs))
    if arm == "specwatch":
        return timed(lambda: specwatch_generate(target, draft, sidecar, domain, on_step=steps.append, **kwargs))
    if arm == "specwatch lookup":
        return timed(lambda: specwatch_generate(target, None, sidecar, label(arm, domain), prompt_lookup=True,
                                                on_step=steps.append, **kwargs))
    if arm == "hf lookup":
        return timed(lambda: target.generate(prompt_lookup_num_tokens=LOOKUP_TOKENS, **kwargs))
    return timed(lambda: target.generate(assistant_model=draft, **kwargs))


class Totals:
    """Tokens and seconds per (arm, phase, domain); each steered arm's steps per (arm, phase, domain)."""

    def __init__(self):
        self.tokens, self.seconds = defaultdict(int), defaultdict(float)
        self.steps, self.plain, self.drafted = defaultdict(int), defaultdict(int), defaultdict(int)

    def add(self, arm, phase, domain, tokens, seconds) -> None:
        for key in ((arm, phase, domain), (arm, phase, "all"), (arm, "stream", "all")):
            self.tokens[key] += tokens
            self.seconds[key] += seconds

    def add_steps(self, arm, phase, domain, steps, tokens: int) -> None:
        """``plain`` counts K = 0 steps but the one the budget forces (a last token has no room for a draft);
        ``drafted`` the K asked for (prompt lookup may find fewer)."""
        done = 0
        for s in steps:
            self.steps[arm, phase, domain] += 1
            self.plain[arm, phase, domain] += s.lookahead == 0 and done < tokens - 1
            self.drafted[arm, phase, domain] += s.lookahead
            done += s.emitted

    def tps(self, arm, phase, domain="all") -> float | None:
        seconds = self.seconds.get((arm, phase, domain))
        return self.tokens[arm, phase, domain] / seconds if seconds else None


class Pod:
    """The sidecar as a second pod sees it: its own pod name (so its model versions are tracked apart), every
    other attribute the sidecar's."""

    def __init__(self, sidecar, pod: str):
        self.sidecar, self.pod = sidecar, pod

    def __getattr__(self, name):
        return getattr(self.sidecar, name)


def bench(setup: Setup, seed: int, background: bool, tokens: int, policy: str, kmax: int,
          console: Console) -> dict:
    """The stream through every arm; ``background`` says where the sidecar's record work runs. One sidecar
    (a process runs one scheduler): prompt lookup's requests reach it from a pod of their own, labelled
    ``<domain>+lookup`` (``LOOKUP``), so its policy and detectors keep the two kinds apart."""
    rng = random.Random(seed)
    arms = setup.arms
    copies = drafts(setup.draft, arms)
    totals, mismatches, order, began = Totals(), 0, list(arms), time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        runtime = in_process(db=f"sqlite:///{tmp}/bench.db", pod="bench-hf", policy=policy, kmax=kmax,
                             seed=seed, alerts_seconds=1.0, background=background)
        sidecar = runtime.sidecar
        sidecars = {"specwatch": sidecar, "specwatch lookup": Pod(sidecar, "bench-hf-lookup")}
        try:
            for arm in arms:  # first calls pay one-off costs (allocations, lazy imports)
                run_arm(arm, setup.target_v1, copies.get(arm), sidecars.get(arm), "warm-up", setup.warm, 8, [])
            for phase, target in enumerate((setup.target_v1, setup.target_v2)):
                requests = setup.requests(phase, rng)
                console.print(f"[bold]{PHASES[phase]}[/]: {len(requests)} requests x {len(arms)} arms ...")
                for i, (domain, ids) in enumerate(requests):
                    n = min(tokens, target.config.max_position_embeddings - len(ids))
                    outputs = {}
                    for arm in order[i % len(arms):] + order[: i % len(arms)]:
                        steps = []
                        seconds, out = run_arm(arm, target, copies.get(arm), sidecars.get(arm), domain, ids, n,
                                               steps)
                        outputs[arm] = out
                        totals.add(arm, PHASES[phase], domain, out.shape[1] - len(ids), seconds)
                        if arm in STEERED:
                            totals.add_steps(arm, PHASES[phase], domain, steps, n)
                    mismatches += any(not torch.equal(o, outputs["target only"]) for o in outputs.values())
                    if (i + 1) % 10 == 0:
                        console.print(f"  {i + 1}/{len(requests)}, {time.perf_counter() - began:.0f} s")
            sidecar.flush()
            switch = sidecar.switch
            states = {arm: {d: (switch.is_on(label(arm, d)), switch.reason(label(arm, d)))
                            if switch is not None else (True, "no switch") for d in setup.domains}
                      for arm in STEERED if arm in arms}
            alerts = [(a.labels["alertname"], a.labels.get("domain", "")) for a in sidecar.alerts.alerts("all")]
        finally:
            runtime.close()
    return report(setup, totals, mismatches, states, alerts)


def gain(x, base) -> float | None:
    return x / base - 1 if x and base else None


def report(setup: Setup, totals: Totals, mismatches: int, states: dict, alerts: dict) -> dict:
    arms, kit = setup.arms, setup.arms == KIT_ARMS
    built_in = [a for a in BUILT_IN if a in arms]
    best = max(built_in, key=lambda a: totals.tps(a, "stream"))  # transformers' best option on the stream
    rows = []
    for phase in PHASES + ("stream",):
        for domain in (setup.domains + ["all"]) if phase != "stream" else ["all"]:
            row = dict(phase=phase, domain=domain, **{arm: totals.tps(arm, phase, domain) for arm in arms})
            if kit:
                row["vs_heuristic"] = gain(row["specwatch"], row[BASELINE])
                row["vs_default"] = gain(row["specwatch"], row["hf default"])
            else:
                row_best = max((row[a] or 0.0 for a in built_in))
                for arm in STEERED:
                    key = "" if arm == "specwatch" else "lookup_"
                    row[f"{key}vs_best"] = gain(row[arm], row[best])
                    row[f"{key}vs_row_best"] = gain(row[arm], row_best)
            if phase != "stream" and domain != "all":
                for arm in (a for a in STEERED if a in arms):
                    key = "" if arm == "specwatch" else "lookup_"
                    steps = totals.steps[arm, phase, domain]
                    row[f"{key}plain_share"] = totals.plain[arm, phase, domain] / steps if steps else None
                    row[f"{key}mean_k"] = totals.drafted[arm, phase, domain] / steps if steps else None
            rows.append(row)
    baseline = BASELINE if kit else best
    key = "vs_heuristic" if kit else "vs_best"
    phase_gains = {r["phase"]: r[key] for r in rows if r["domain"] == "all" and r["phase"] != "stream"}
    stream = next(r for r in rows if r["phase"] == "stream")
    sw_states = states["specwatch"]
    stale_off = not sw_states["logs"][0] if "logs" in sw_states else None
    goals = dict(stream_gain=stream[key] >= GOAL_GAIN,
                 no_phase_below=all(g >= GOAL_FLOOR for g in phase_gains.values()), stale_switched_off=stale_off)
    switch = {arm: {d: dict(on=on, reason=reason) for d, (on, reason) in s.items()} for arm, s in states.items()}
    if kit:  # the kit's results keep their shape
        return dict(rows=rows, goals=goals, mismatched_requests=mismatches, alerts=alerts, switch=switch["specwatch"])
    return dict(rows=rows, baseline=baseline, goals=goals, mismatched_requests=mismatches, alerts=alerts,
                switch=switch)


def fmt(x, pct=False) -> str:
    return "" if x is None else (f"{x:+.1%}" if pct else f"{x:.1f}")


def share(x) -> str:
    return "" if x is None else f"{x:.0%}"


def mean_k(x) -> str:
    return "" if x is None else f"{x:.1f}"


def print_tables(console: Console, result: dict, arms: tuple[str, ...]) -> None:
    kit = arms == KIT_ARMS
    if kit:
        title = "tokens/s (greedy, one thread); specwatch against transformers' heuristic and default"
        extra = (("vs heuristic", "vs_heuristic", fmt, True), ("vs default", "vs_default", fmt, True),
                 ("K=0 steps", "plain_share", share, None), ("mean K", "mean_k", mean_k, None))
    else:
        title = (f"tokens/s (greedy, one thread); specwatch against transformers' best built-in option on the "
                 f"stream ({result['baseline']}) and each row's best")
        extra = (("sw vs best", "vs_best", fmt, True), ("sw vs row best", "vs_row_best", fmt, True),
                 ("sw K=0", "plain_share", share, None), ("sw K", "mean_k", mean_k, None),
                 ("lookup vs best", "lookup_vs_best", fmt, True),
                 ("lookup vs row best", "lookup_vs_row_best", fmt, True),
                 ("lookup K=0", "lookup_plain_share", share, None), ("lookup K", "lookup_mean_k", mean_k, None))
    t = Table(title=title)
    for col in ("phase", "domain", *arms, *(e[0] for e in extra)):
        t.add_column(col, justify="right")
    for r in result["rows"]:
        t.add_row(r["phase"], r["domain"], *(fmt(r[a]) for a in arms),
                  *(f(r.get(k), p) if p else f(r.get(k)) for _, k, f, p in extra))
    console.print(t)
    switches = {"specwatch": result["switch"]} if kit else result["switch"]
    for arm, states in switches.items():
        for domain, s in states.items():
            console.print(f"{arm} switch {label(arm, domain)}: {'on' if s['on'] else 'OFF'} ({s['reason']})")
    console.print(f"alerts: {result['alerts']}; requests whose outputs differed between arms: "
                  f"{result['mismatched_requests']}")
    g = result["goals"]
    base = "the heuristic" if kit else f"the best built-in ({result['baseline']})"
    console.print(f"goals (specwatch against {base}): stream >= +{GOAL_GAIN:.0%}: "
                  f"{'yes' if g['stream_gain'] else 'NO'}; no phase below {GOAL_FLOOR:.0%}: "
                  f"{'yes' if g['no_phase_below'] else 'NO'}; stale domain off: "
                  f"{'yes' if g['stale_switched_off'] else 'NO'}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="kit", help="kit (the model kit, --size), or smollm2-135m (prepared)")
    parser.add_argument("--size", default="full", help="the kit's size")
    parser.add_argument("--quick", action="store_true",
                        help="kit: 30 + 40 requests (about a minute; the full run about 3); "
                             "real model: 6 + 6, 24 tokens (about 3 minutes)")
    parser.add_argument("--requests", default=None,
                        help="requests of phase 1 and 2 (default: the demo's 90,130; 30,30 on the real model)")
    parser.add_argument("--tokens", type=int, default=None, help="new tokens per request (64; 48 on the real model)")
    parser.add_argument("--mix", default=None,
                        help="real model: domain weights, e.g. code=2,logs=1 (default: all alike)")
    parser.add_argument("--policy", default=sidecar_config.SidecarConfig.policy)
    parser.add_argument("--kmax", type=int, default=32, help="the policy's largest K (module docstring)")
    parser.add_argument("--ingest", choices=("inline", "background"), default="inline",
                        help="where the sidecar's record work runs (the decoding thread, or its ingest worker)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    real = args.model != "kit"
    if args.quick:
        (first, second), tokens = ((6, 6), 24) if real else ((30, 40), args.tokens or 64)
    else:
        first, second = (int(n) for n in (args.requests or ("30,30" if real else "90,130")).split(","))
        tokens = args.tokens or (48 if real else 64)
    out = args.out or (RESULTS.with_name(f"hf_generate_{args.model}.json") if real else RESULTS)
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    console = Console(width=220 if real else 160)
    if real:
        setup = real_setup(args.model, (first, second), args.mix)
    else:
        setup = kit_setup(args.size, DemoPlan(requests=(first, second, 1), seed=args.seed))
    started = time.perf_counter()
    result = bench(setup, args.seed, args.ingest == "background", tokens, args.policy, args.kmax, console)
    print_tables(console, result, setup.arms)
    out.parent.mkdir(parents=True, exist_ok=True)
    head = dict(benchmark="hf_generate", size=args.size) if not real else dict(benchmark="hf_generate",
                                                                                model=args.model)
    extra = dict(lookup_tokens=LOOKUP_TOKENS) if real else {}
    out.write_text(json.dumps(dict(
        **head, requests=[first, second], tokens=tokens, policy=args.policy, kmax=args.kmax, ingest=args.ingest,
        seed=args.seed, mix=list(map(list, setup.mix)), **extra, transformers=transformers.__version__,
        torch=torch.__version__, threads=torch.get_num_threads(), machine=platform.machine(),
        seconds=round(time.perf_counter() - started, 1), versions=setup.versions,
        when=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **result), indent=2))
    console.print(f"wrote {out} in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
