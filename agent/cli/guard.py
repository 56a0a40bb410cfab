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
from specwatch_core import settings
from storage import StoreError

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
    re-distill first (a drop above `--max-drop`). Exits with 3 when any domain would fall below break-even
    (`--strict`: or should re-distill first), so it can gate a rollout."""
    from agent.decoding.sampling import SamplingParams
    from agent.decoding.versions import weights_version
    from agent.guard import guard as run_guard
    from agent.guard.sample import SampleError, load_sample
    from agent.kit.load import load_model
    from policies.rollout import RolloutConfig, StepCost

    if threads:
        import torch

        torch.set_num_threads(threads)
    now = time.time()
    try:
        start = parse_time(since, now)
        config = RolloutConfig(kmax=kmax, min_speedup=min_speedup, max_drop=max_drop)
        fixed = StepCost.from_ratio(cost_ratio) if cost_ratio is not None else None
        params = SamplingParams(temperature)
        sample = load_sample(prompts, _encoder(target))
        with console.status("loading the models ...") if fmt is Format.table else nullcontext():
            new, old = load_model(target, device), load_model(draft, device)
    except (SampleError, ValueError, OSError) as exc:
        raise fail(str(exc))
    versions = (weights_version(new), weights_version(old))
    try:
        history = _history(db, versions[1], current_target, start, now, kmax)
    except StoreError as exc:
        raise fail(str(exc))
    cost, source = (fixed, "flag") if fixed else (history.cost, "history") if history.cost else (None, "measured")
    if cost is None:
        cost = _measured_cost(new, old, sample, new_tokens, kmax)
    try:
        report = run_guard(new, old, sample, history, cost, versions=versions, cost_source=source,
                           lookahead=lookahead, params=params, new_tokens=new_tokens, batch_size=batch_size,
                           seed=seed, config=config, pad_id=new.config.pad_token_id or 0)
    except ValueError as exc:
        raise fail(str(exc))
    gate = report.failed + ([d.domain for d in report.domains if d.verdict.verdict == "redistill"] if strict else [])
    if fmt is Format.json:
        print(json.dumps({**report.to_dict(), "gate_failed": sorted(gate)}, indent=2))
    else:
        title = None
        if fmt is Format.table:
            title = (f"draft {versions[1]} against target {versions[0]} (now {history.target_version or '?'}); "
                     f"c {cost.ratio:.2f} ({source})")
        emit_rows(report.rows(), fmt, title=title, drop=("positions", "prompts", "break-even"))
        if fmt is Format.table and history.note:
            console.print(history.note, highlight=False)
    if gate:
        failed = ", ".join(f"{d.domain} ({d.verdict.action})" for d in report.domains if d.domain in gate)
        errors.print(f"gate failed: {failed}", highlight=False)
        raise typer.Exit(BELOW_BREAK_EVEN)


def _measured_cost(target, draft, sample: dict[str, list[list[int]]], new_tokens: int, kmax: int):
    """Without history: the step cost measured here (agent/decoding/cost_model.py: a draft forward, a verify pass per
    K), at the sample's mean context (prompt plus half the new tokens)."""
    from agent.decoding import cost_model

    limit = min(m.config.max_position_embeddings for m in (target, draft)) - kmax - 1
    context = cost_model.typical_context([p for texts in sample.values() for p in texts], new_tokens, limit)
    return cost_model.measure(target, draft, context, kmax).cost


def _history(db: str | None, draft_version: str, current_target: str | None, since: float, now: float, kmax: int):
    """The store's history; without ``--db`` a missing default database is no history, not an error."""
    from agent.guard.history import History, current_history
    from storage import Store

    try:
        store = Store.open(db or settings.db_url(), migrate_schema=False)
    except StoreError as exc:
        if db is not None:
            raise
        return History(current_target, draft_version, {}, None, f"no history: {exc}")
    try:
        return current_history(store, draft_version, current_target, since, now, kmax)
    finally:
        store.close(flush=False)


def _encoder(folder: Path):
    """Text prompts are encoded with the target's tokenizer, loaded only when a prompt is text."""
    loaded = []

    def encode(text: str) -> list[int]:
        if not loaded:
            from transformers import AutoTokenizer

            loaded.append(AutoTokenizer.from_pretrained(folder))
        return loaded[0](text, add_special_tokens=False)["input_ids"]

    return encode

