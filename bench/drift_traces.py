"""Record sampled acceptance traces of the model kit for bench/drift.py: flags and expected acceptance.

The greedy counterfactual traces of bench/traces.py fix every lookahead's outcome but carry no expected
acceptance (sum_x min(p(x), q(x))), the signal of the expected-acceptance CUSUM. Here the real
SpeculativeDecoder samples (temperature 1, so a drafted token is accepted with probability min(1, p/q) and
the expected acceptance is what a flag's probability is) at a fixed lookahead, per target (v1, v2), domain,
held-out prompt and seed; every step keeps what the detectors see: accepted, drafted, and the expected
acceptance of the positions up to and including the first rejection (3 decimals). No timings, one torch
thread, seeds derived from (target, domain, prompt, repeat): a rerun writes the same bytes.

    python bench/drift_traces.py [--lookahead 4] [--tokens 64] [--prompts 32] [--repeats 4]
"""

from __future__ import annotations

import argparse
import sys
import zlib
from pathlib import Path

import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.decoding.decoder import SpeculativeDecoder  # noqa: E402
from agent.kit.load import load_kit  # noqa: E402
from bench.drift_sources import sampled_path  # noqa: E402
from bench.replay import FORMAT, TRACES, write_json_gz  # noqa: E402


def seed_of(*parts) -> int:
    """A stable seed from names and numbers (Python's hash() of strings changes per process)."""
    return zlib.crc32(":".join(map(str, parts)).encode())


def record_request(decoder: SpeculativeDecoder, ids: list[int], tokens: int, lookahead: int) -> list[list]:
    """One request: per step [accepted, drafted, [expected acceptance of the counted positions]]."""
    steps = []
    for s in decoder.generate(ids, tokens, lookahead=lookahead).steps:
        counted = s.accepted + (s.accepted < s.lookahead)
        steps.append([s.accepted, s.lookahead, [round(v, 3) for v in (s.expected_acceptance or [])[:counted]]])
    return steps


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="full")
    parser.add_argument("--lookahead", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=64, help="new tokens per request")
    parser.add_argument("--prompts", type=int, default=32, help="held-out prompts per domain")
    parser.add_argument("--repeats", type=int, default=4, help="seeded generations per prompt")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--out-dir", type=Path, default=TRACES)
    args = parser.parse_args(argv)
    console = Console(width=120)
    torch.set_num_threads(1)  # one thread: the same floating-point sums, hence the same bytes
    kit = load_kit(args.size, device="cpu")
    targets = {"target-v1": kit.target_v1, "target-v2": kit.target_v2}
    prompts = {d: kit.prompt_ids(d)[: args.prompts] for d in kit.domains}
    out: dict[str, dict[str, list]] = {t: {d: [] for d in prompts} for t in targets}
    total = len(targets) * sum(map(len, prompts.values())) * args.repeats
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=console) as bar:
        task = bar.add_task("sampled traces", total=total)
        for name, target in targets.items():
            for domain, plist in prompts.items():
                bar.update(task, description=f"{name} {domain}")
                for j, ids in enumerate(plist):
                    for r in range(args.repeats):
                        decoder = SpeculativeDecoder(target, kit.draft, temperature=args.temperature,
                                                     seed=seed_of(name, domain, j, r),
                                                     target_version=kit.versions[name],
                                                     draft_version=kit.versions["draft"])
                        out[name][domain].append({"prompt": j, "repeat": r, "steps": record_request(
                            decoder, ids, args.tokens, args.lookahead)})
                        bar.advance(task)
    meta = {"size": args.size, "lookahead": args.lookahead, "tokens": args.tokens, "prompts": args.prompts,
            "repeats": args.repeats, "temperature": args.temperature, "versions": kit.versions,
            "torch": torch.__version__, "threads": 1,
            "note": "per step [accepted, drafted, expected acceptance of positions 1..accepted+1 (<= drafted)]"}
    path = sampled_path(args.size, args.out_dir)
    write_json_gz(path, {"format": FORMAT, "meta": meta, "traces": out})
    console.print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
