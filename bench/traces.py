"""Record counterfactual traces of the model kit for bench/replay.py (greedy decoding).

Acceptance stage: per domain and target (v1, v2, each with the kit's draft) and held-out prompt, the target's
greedy continuation T of ``--tokens`` tokens; then at every position i the draft drafts greedily from
prompt + T[:i] (up to kmax tokens, never past the budget) and m[i] = the length of the common prefix of
its tokens with T[i:]. In greedy mode that fixes the outcome of every lookahead K: accepted = min(m[i], K).
The draft's confidence (its probability of each drafted token, 3 decimals) is kept for stop rules.
Deterministic (one torch thread, no timestamp): a rerun writes the same bytes.

Costs stage: per-step (draft_seconds, verify_seconds) of the real SpeculativeDecoder at fixed K = 0..kmax on
a few prompts per domain and both targets, keyed by the number of tokens the step drafted (first steps,
which include the prompt's prefill, are left out). Timing: run it on an idle machine.

    python bench/traces.py [--size full] [--kmax 8] [--tokens 64] [--stage all|acceptance|costs|check]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.decoding.decoder import SpeculativeDecoder, crop, forward  # noqa: E402  (the decoder's own forward)
from agent.decoding.sampling import SamplingParams, probabilities  # noqa: E402
from agent.kit.load import load_kit  # noqa: E402
from bench.replay import (FORMAT, PHASES, TRACES, RequestTrace, acceptance_path, costs_path,  # noqa: E402
                          drafted_count, write_json_gz)

GREEDY = SamplingParams()
_DEFAULT_THREADS = torch.get_num_threads()


# -- acceptance ----------------------------------------------------------------------------------------
@torch.inference_mode()
def greedy_continuation(target, ids: list[int], tokens: int) -> list[int]:
    """The target's greedy tokens after ``ids``, computed as the decoder's K = 0 steps compute them."""
    out, cache, feed = [], None, list(ids)
    for _ in range(tokens):
        logits, cache = forward(target, feed, cache, 1)
        out.append(int(torch.argmax(logits[0, -1])))
        feed = out[-1:]
    return out


@torch.inference_mode()
def record_acceptance(target, draft, ids: list[int], tokens: int, kmax: int) -> tuple[RequestTrace, list[int]]:
    """The request's trace (m and confidences per position) and the target's continuation T."""
    cont = greedy_continuation(target, ids, tokens)
    m, conf = [], []
    cache, feed = None, list(ids)
    for i in range(tokens):
        n = min(kmax, tokens - 1 - i)
        prefix = len(ids) + i
        if n == 0:
            m.append(0)
            conf.append(())
            continue
        logits, cache = forward(draft, feed, cache, 1)  # catch up to prompt + T[:i]
        drafted, probs = [], []
        for j in range(n):
            if j:
                logits, cache = forward(draft, drafted[-1:], cache, 1)
            token = int(torch.argmax(logits[0, -1]))
            drafted.append(token)
            probs.append(round(min(max(float(probabilities(logits[0, -1], GREEDY)[token]), 0.0), 1.0), 3))
        crop(cache, prefix)
        feed = [cont[i]]
        accepted = 0
        while accepted < n and drafted[accepted] == cont[i + accepted]:
            accepted += 1
        m.append(accepted)
        conf.append(tuple(probs))
    return RequestTrace(tuple(m), tuple(conf)), cont


def check_against_decoder(target, draft, ids: list[int], trace: RequestTrace, cont: list[int], k: int,
                          stop=None) -> list[str]:
    """Run the real decoder at fixed ``k`` and compare it step by step with replaying the trace at ``k``.

    Returns the mismatches (empty when the trace predicts every step's drafted and accepted counts).
    """
    decoder = SpeculativeDecoder(target, draft, target_version="t", draft_version="d")
    gen = decoder.generate(ids, len(trace.m), lookahead=k, stop_drafting=stop)
    problems, i = [], 0
    if gen.tokens != cont:
        problems.append("generated tokens differ from the target's greedy continuation")
    for s, step in enumerate(gen.steps):
        if i >= len(trace.m):
            problems.append(f"step {s}: the decoder ran past the trace")
            break
        n = drafted_count(trace, i, k, stop)
        a = min(trace.m[i], n)
        if (step.lookahead, step.accepted) != (n, a):
            problems.append(f"step {s} at position {i}: decoder drafted {step.lookahead} accepted "
                            f"{step.accepted}, trace says {n} and {a}")
            break
        if any(abs(c - t) > 1.5e-3 for c, t in zip(step.draft_confidence, trace.conf[i])):
            problems.append(f"step {s} at position {i}: draft confidence differs")
        i += a + 1
    return problems


# -- costs ---------------------------------------------------------------------------------------------
def record_costs(decoder: SpeculativeDecoder, prompts: list[list[int]], tokens: int, kmax: int,
                 samples: dict[int, list[list[float]]], advance=lambda: None) -> None:
    """Add (draft, verify) seconds of every step but the first to ``samples[drafted count]``.

    K values rotate per prompt, so slow spells of a shared machine spread over all of them."""
    for p, ids in enumerate(prompts):
        for r in range(kmax + 1):
            k = (p + r) % (kmax + 1)
            gen = decoder.generate(ids, tokens, lookahead=k)
            for step in gen.steps[1:]:
                samples.setdefault(step.lookahead, []).append(
                    [round(step.draft_seconds, 7), round(step.verify_seconds, 7)])
            advance()


def machine() -> dict:
    model = next((line.split(":", 1)[1].strip() for line in _cpuinfo() if line.startswith("model name")), "")
    return {"machine": platform.machine(), "cpu": model, "cpus": os.cpu_count(),
            "python": platform.python_version(), "torch": torch.__version__, "threads": torch.get_num_threads()}


def _cpuinfo() -> list[str]:
    try:
        return Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return []


# -- stages --------------------------------------------------------------------------------------------
def _progress(console: Console) -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                    console=console)


def acceptance_stage(kit, args, console: Console) -> Path:
    torch.set_num_threads(1)  # one thread: the same floating-point sums, hence the same bytes, everywhere
    targets = {"target-v1": kit.target_v1, "target-v2": kit.target_v2}
    prompts = {d: kit.prompt_ids(d)[: args.prompts] for d in kit.domains}
    out: dict[str, dict[str, list]] = {t: {} for t in targets}
    mismatches = []
    with _progress(console) as bar:
        task = bar.add_task("acceptance", total=len(targets) * sum(map(len, prompts.values())))
        for name, target in targets.items():
            for domain, plist in prompts.items():
                rows = out[name][domain] = []
                for j, ids in enumerate(plist):
                    bar.update(task, description=f"acceptance {name} {domain}")
                    trace, cont = record_acceptance(target, kit.draft, ids, args.tokens, args.kmax)
                    rows.append({"m": list(trace.m), "conf": [list(c) for c in trace.conf]})
                    if j < args.check:  # the real decoder must do what the trace says
                        for k in (1, args.kmax // 2, args.kmax):
                            mismatches += [f"{name} {domain} #{j} K={k}: {p}" for p in
                                           check_against_decoder(target, kit.draft, ids, trace, cont, k)]
                    bar.advance(task)
    meta = {"size": args.size, "kmax": args.kmax, "tokens": args.tokens, "prompts": args.prompts,
            "versions": kit.versions, "phases": {str(p): t for p, t in PHASES.items()}, **machine(),
            "checked_prompts_per_domain": args.check, "check_mismatches": mismatches}
    path = acceptance_path(args.size, args.out_dir)
    write_json_gz(path, {"format": FORMAT, "meta": meta, "traces": out})
    for line in mismatches:
        console.print(f"[red]mismatch[/] {line}")
    return path


def costs_stage(kit, args, console: Console) -> Path:
    torch.set_num_threads(args.threads or _DEFAULT_THREADS)
    prompts = [ids for d in kit.domains for ids in kit.prompt_ids(d)[: args.cost_prompts]]
    samples: dict[int, list[list[float]]] = {}
    load_before = os.getloadavg()
    started = time.time()
    with _progress(console) as bar:
        task = bar.add_task("costs", total=2 * len(prompts) * (args.kmax + 1))
        for name, target in (("target-v1", kit.target_v1), ("target-v2", kit.target_v2)):
            decoder = SpeculativeDecoder(target, kit.draft, target_version=kit.versions[name],
                                         draft_version=kit.versions["draft"])
            decoder.generate(prompts[0], 16, lookahead=2)  # warm-up
            bar.update(task, description=f"costs {name}")
            record_costs(decoder, prompts, args.tokens, args.kmax, samples, lambda: bar.advance(task))
    meta = {"size": args.size, "kmax": args.kmax, "tokens": args.tokens, "prompts_per_domain": args.cost_prompts,
            "versions": kit.versions, **machine(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "seconds": round(time.time() - started, 1),
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
            "note": "per drafted count n: [draft_seconds, verify_seconds] of real decoder steps, first steps "
                    "(prompt prefill) excluded; targets v1 and v2 pooled (same shapes)"}
    path = costs_path(args.size, args.out_dir)
    write_json_gz(path, {"format": FORMAT, "meta": meta,
                         "samples": {str(n): samples[n] for n in sorted(samples)}})
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="full")
    parser.add_argument("--kmax", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=64, help="new tokens per request")
    parser.add_argument("--stage", choices=("all", "acceptance", "costs"), default="all")
    parser.add_argument("--prompts", type=int, default=32, help="held-out prompts per domain (acceptance)")
    parser.add_argument("--check", type=int, default=2,
                        help="prompts per domain and target checked against the real decoder")
    parser.add_argument("--cost-prompts", type=int, default=4, help="prompts per domain for the costs stage")
    parser.add_argument("--threads", type=int, default=0, help="torch threads for the costs stage (0: default)")
    parser.add_argument("--out-dir", type=Path, default=TRACES)
    args = parser.parse_args(argv)
    console = Console(width=120)
    kit = load_kit(args.size, device="cpu")
    paths = []
    if args.stage in ("all", "acceptance"):
        paths.append(acceptance_stage(kit, args, console))
    if args.stage in ("all", "costs"):
        paths.append(costs_stage(kit, args, console))
    for path in paths:
        console.print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
