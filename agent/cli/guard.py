"""``specwatch guard``: before a target update ships, the acceptance the current draft will get against it,
per domain, set beside the history under the current target, with a verdict; a CI/CD gate."""

from __future__ import annotations

import json
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Optional

import typer

from agent.cli.output import Format, console, emit_rows, errors, fail
from agent.cli.stats import DbOption
from agent.runtime.times import parse_time

EXAMPLE = ("Example: specwatch guard --target models/target-v2 --draft models/draft --prompts sample.json "
           "--db sqlite:///specwatch.db --format json")
BELOW_BREAK_EVEN = 3  # exit code when a domain would fall below break-even (1 is an error, 2 a usage error)


def guard(
    target: Annotated[Path, typer.Option(exists=True, file_okay=False, show_default=False,
                                         help="The new target: a local checkpoint folder (save_pretrained).")],
    draft: Annotated[Path, typer.Option(exists=True, file_okay=False, show_default=False,
                                        help="The draft served now: a local checkpoint folder.")],
    prompts: Annotated[Path, typer.Option(exists=True, dir_okay=False, show_default=False,
                                          help="Prompts per domain: JSON {domain: [text or token ids]} or JSON "
                                               "lines {domain, text|ids} (docs/guard.md).")],
    db: DbOption = None,
    since: Annotated[str, typer.Option(help="History from: a span back from now (30m, 24h, 7d) or an ISO time.")
                     ] = "24h",
    current_target: Annotated[Optional[str], typer.Option(
        help="Version of the target served now; default the target the store saw last.")] = None,
    lookahead: Annotated[Optional[int], typer.Option(
        "--lookahead", "-k", min=0, max=64, help="The K served now; default each domain's from the history, "
                                                 "else 4.")] = None,
    kmax: Annotated[int, typer.Option(min=1, max=64, help="Largest K considered.")] = 8,
    min_speedup: Annotated[float, typer.Option(
        help="Predicted tokens/s ratio over plain decoding a K must beat (1.0 = break-even).")] = 1.0,
    max_drop: Annotated[float, typer.Option(
        help="Acceptance drop from the history above which the draft is re-distilled first.")] = 0.10,
    cost_ratio: Annotated[Optional[float], typer.Option(
        help="c = draft token cost / target step cost; default from the history's step times, else measured "
             "here.")] = None,
    new_tokens: Annotated[int, typer.Option(min=1, help="Tokens the new target continues each prompt by.")] = 64,
    temperature: Annotated[float, typer.Option(min=0.0, help="The serving temperature (0 = greedy).")] = 0.0,
    strict: Annotated[bool, typer.Option(help="Also exit with 3 when a domain should re-distill first.")] = False,
    batch_size: Annotated[int, typer.Option(min=1, help="Prompts per forward pass.")] = 64,
    seed: Annotated[int, typer.Option(help="Seed for sampled continuations.")] = 0,
    threads: Annotated[int, typer.Option(
        min=0, help="Torch CPU threads (0: torch's default). One by default: on 2 busy cores the 200-prompt "
                    "benchmark took 16 s on one thread and 70 s on two.")] = 1,
    device: Annotated[str, typer.Option(help="auto (CUDA when present), cpu, cuda:N.")] = "auto",
    fmt: Annotated[Format, typer.Option("--format", help="table, json or csv.")] = Format.table,
) -> None:
    """Predict, per domain, the acceptance the draft will get against a new target before the target ships:
    the new target continues each sampled prompt, and the draft's expected acceptance on that continuation
    (greedy: argmax agreement; sampling: sum of min(p, q)) is set beside the history under the current target
    (`--db`). Per domain: acceptance before and after, the predicted tokens/s ratio over plain decoding at the
    K to serve, and the action: keep speculation, lower K, turn off (below break-even at every K) or
    re-distill first (a drop above `--max-drop`). Exits with 3 when the update would put a domain below
    break-even (`--strict`: or it should re-distill first), so it can gate a rollout; a domain already below
    break-even under the current target (its history at the same cost) is reported, not gated."""
    from agent.guard.run import GuardError, GuardOptions, run

    now = time.time()
    try:
        start = parse_time(since, now)
    except ValueError as exc:
        raise fail(str(exc))
    options = GuardOptions(target, draft, prompts, start, now, db=db, current_target=current_target,
                           lookahead=lookahead, kmax=kmax, min_speedup=min_speedup, max_drop=max_drop,
                           cost_ratio=cost_ratio, new_tokens=new_tokens, temperature=temperature,
                           batch_size=batch_size, seed=seed, threads=threads, device=device)
    try:
        report = run(options, console.status("loading the models ...") if fmt is Format.table else nullcontext())
    except GuardError as exc:
        raise fail(str(exc))
    gate = report.gate(strict)
    if fmt is Format.json:
        print(json.dumps({**report.to_dict(), "gate_failed": sorted(gate)}, indent=2))
    else:
        emit_rows(report.rows(), fmt, title=report.title if fmt is Format.table else None,
                  drop=("positions", "prompts", "break-even"))
        if fmt is Format.table and report.history.note:
            console.print(report.history.note, highlight=False)
    if gate:
        errors.print(report.gate_message(gate), highlight=False)
        raise typer.Exit(BELOW_BREAK_EVEN)
