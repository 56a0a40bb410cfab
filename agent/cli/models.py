"""`specwatch models build|ship|eval|distill|export-gguf`: the local model kit from the command line.

Thin by design: each command builds objects, calls one library function and prints; library errors
become a one-line message and exit code 1 (Ctrl-C during a build exits 130 and keeps its progress).
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
    TimeRemainingColumn
from rich.table import Table

from specwatch_core import settings

models_app = typer.Typer(help="Build, evaluate and re-distill the local model kit (byte-level target v1, "
                              "draft, target v2).", no_args_is_help=True, rich_markup_mode="rich")
console = Console()
errors = Console(stderr=True)


class Size(str, Enum):
    tiny = "tiny"
    full = "full"


class Format(str, Enum):
    table = "table"
    json = "json"


SizeOption = Annotated[Size, typer.Option("--size", help="Kit size: tiny (tests, ~30 s) or full (~8 min).")]


@contextmanager
def _one_line_errors():
    from agent.kit.build import KitBuildError
    from agent.kit.shipped import ShippedWeightsError

    try:
        yield
    except (KitBuildError, ShippedWeightsError, ValueError, OSError) as exc:  # KitNotBuiltError is an OSError
        errors.print(f"[red]error:[/red] {exc}", highlight=False, markup=True)
        raise typer.Exit(1) from None


def _bar(out: Console = console) -> Progress:
    return Progress(TextColumn("{task.description:<10}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("loss {task.fields[loss]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                    console=out)


@models_app.command(epilog="Example: specwatch models build --size tiny")
def build(size: SizeOption = Size.full,
          force: Annotated[bool, typer.Option("--force", help="Delete the kit, build afresh.")] = False,
          shipped: Annotated[bool, typer.Option(
              "--shipped", help="Take the models from the weights shipped in the repository (float16, seconds) "
                                "instead of training them; the demo does this when the kit is missing.")] = False):
    """Train the kit on the CPU under SPECWATCH_HOME/kit/SIZE; rerun to resume an interrupted build."""
    build_to(size, force, console, shipped)


@models_app.command(epilog="Example: specwatch models build --size full --force && specwatch models ship --size full")
def ship(size: SizeOption = Size.full):
    """Write the trained kit's weights into the repository (agent/kit/weights/SIZE: float16 safetensors and a
    manifest with sha256s, versions and the draft's acceptance on the trained and the shipped weights)."""
    from agent.kit.ship import ship as run

    with _one_line_errors():
        with console.status(f"writing the {size.value} kit's weights and measuring them"):
            manifest = run(size.value)
    table = Table(title=f"shipped {size.value} kit (acceptance at K={manifest['acceptance']['lookahead']}, "
                        f"{manifest['acceptance']['prompts_per_domain']} prompts per domain)")
    for column in ("model", "bytes", "trained version", "shipped version"):
        table.add_column(column)
    for name, m in manifest["models"].items():
        table.add_row(name, f"{m['bytes']:,}", m["trained_version"], m["version"])
    console.print(table)
    acc = manifest["acceptance"]
    for target, domains in acc["trained"].items():
        console.print(f"{target}: " + ", ".join(f"{d} {a:.3f} -> {acc['shipped'][target][d]:.3f}"
                                                for d, a in domains.items()))


def build_to(size: Size, force: bool, out: Console, shipped: bool = False) -> None:
    """The build with its progress bar and manifest table on ``out`` (the demo passes stderr under --format
    json or csv, keeping stdout for the summary). ``shipped``: models from the shipped weights."""
    from agent.kit.build import BuildProgress, build_kit

    with _bar(out) as bar:
        tasks: dict[str, int] = {}

        class Show(BuildProgress):
            def stage_started(self, stage, total):
                tasks[stage] = bar.add_task(stage, total=total, loss="-")

            def stage_advanced(self, stage, done, total, loss):
                bar.update(tasks[stage], completed=done, loss=f"{loss:.3f}")

            def stage_finished(self, stage, info, skipped):
                if skipped:
                    bar.console.print(f"[dim]{stage}: already built ({info['seconds']:.0f} s)[/dim]")
                else:
                    bar.update(tasks[stage], completed=bar.tasks[tasks[stage]].total)

        try:
            with _one_line_errors():
                root = build_kit(size.value, progress=Show(), force=force, shipped=shipped)
        except KeyboardInterrupt:
            bar.stop()
            errors.print(f"interrupted; run `specwatch models build --size {size.value}` again to resume")
            raise typer.Exit(130) from None
    _print_manifest(root, out)


def _print_manifest(root: Path, out: Console = console) -> None:
    from agent.kit import layout

    manifest = layout.read_manifest(root)
    table = Table(title=f"kit {manifest['kit']} ({root})")
    for column in ("stage", "seconds", "steps", "parameters", "loss", "version"):
        table.add_column(column, justify="left" if column in ("stage", "version") else "right")
    for stage, info in manifest["stages"].items():
        table.add_row(stage, f"{info['seconds']:.1f}", str(info.get("steps", "shipped" if "source" in info else "")),
                      f"{info['parameters']:,}" if "parameters" in info else "",
                      f"{info['loss']:.3f}" if "loss" in info else "", info.get("version", ""))
    out.print(table)
    out.print(f"total {manifest['seconds']:.1f} s")


@models_app.command("eval", epilog="Example: specwatch models eval --size full --lookahead 4")
def evaluate(
    size: SizeOption = Size.full,
    target: Annotated[Optional[Path], typer.Option(help="A target folder, not the kit's v1, v2.")] = None,
    draft: Annotated[Optional[Path], typer.Option(help="A draft folder (with --target).")] = None,
    lookahead: Annotated[int, typer.Option("--lookahead", "-k", min=1, help="Drafted tokens per step.")] = 4,
    new_tokens: Annotated[Optional[int], typer.Option(min=1, help="Tokens per prompt (kit's).")] = None,
    per_domain: Annotated[Optional[int], typer.Option(min=1, help="Prompts per domain (all).")] = None,
    fmt: Annotated[Format, typer.Option("--format", help="table or json.")] = Format.table,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 2 when a required check fails.")] = False,
):
    """Acceptance of the draft vs target v1 and v2 per domain, with the cost ratio c.

    Greedy speculative decoding on held-out prompts; also per-token agreement and target loss on held-out
    text (bits/byte).
    """
    from agent.kit import layout
    from agent.kit.evaluate import evaluate as run, evaluate_kit
    from agent.kit.load import KitNotBuiltError, load_kit, load_model

    with _one_line_errors():
        device = settings.device()
        if (target is None) != (draft is None):
            raise ValueError("--target and --draft go together")
        if target is None:
            kit = load_kit(size.value, device=device)
            report = evaluate_kit(kit, lookahead=lookahead, new_tokens=new_tokens,
                                  prompts_per_domain=per_domain)
        else:
            # Any pair is measured on the kit's held-out prompts and text.
            root = layout.kit_dir(size.value)
            manifest = layout.read_manifest(root)
            if manifest is None or "corpus" not in manifest["stages"]:
                raise KitNotBuiltError(f"no prompts in {root}; build them with: "
                                       f"specwatch models build --size {size.value}")
            texts = {d: p[:per_domain] for d, p in layout.load_prompts(root).items()}
            t_model, d_model = load_model(target, device), load_model(draft, device)
            report = run({"target": t_model}, d_model, texts, layout.load_heldout(root), lookahead=lookahead,
                         new_tokens=new_tokens or manifest["spec"]["eval_new_tokens"])
    if fmt is Format.json:
        console.print_json(json.dumps(report.to_dict()))
    else:
        _print_report(report)
    if strict and not report.ok:
        raise typer.Exit(2)


def _print_report(report) -> None:
    targets = list(report.costs)
    first = report.results[0]
    table = Table(title=f"draft vs {', '.join(targets)}: greedy speculative decoding, K={report.lookahead}, "
                        f"{first.prompts} prompts x {report.new_tokens} tokens per domain")
    table.add_column("domain")
    for prefix in ("accept", "agree", "bits/B"):
        for name in targets:
            table.add_column(f"{prefix} {name}", justify="right")
        if prefix == "accept" and len(targets) > 1:
            table.add_column("drop", justify="right")
    for domain in dict.fromkeys(r.domain for r in report.results):
        cells = [report.cell(name, domain) for name in targets]
        row = [domain] + [f"{c.acceptance:.3f}" for c in cells]
        if len(cells) > 1:
            row.append(f"{cells[0].acceptance - cells[1].acceptance:+.3f}")
        row += [f"{c.agreement:.3f}" for c in cells]
        row += [f"{c.bits_per_byte:.3f}" if c.bits_per_byte is not None else "-" for c in cells]
        table.add_row(*row)
    console.print(table)
    console.print("accept = accepted / drafted; agree = share of positions where the draft's argmax equals "
                  "the target's along the target's greedy continuation; bits/B = target loss on held-out "
                  "text, bits per byte.", style="dim")
    for name, c in report.costs.items():
        console.print(f"cost ratio c vs {name}: draft {c.draft_ms:.2f} ms / target {c.target_ms:.2f} ms "
                      f"per single-token forward = {c.ratio:.2f}")
    for check in report.checks:
        mark = "[green]PASS[/]" if check.holds else ("[red]FAIL[/]" if check.required else "[yellow]MISS[/]")
        console.print(f"{mark} {check.name}: {check.detail}")


@models_app.command(epilog="Example: specwatch models distill --target KIT/target-v2 --draft KIT/draft "
                           "--out draft-v2 --prompts live.json  (KIT = ~/.cache/specwatch/kit/full)")
def distill(
    target: Annotated[Path, typer.Option(help="Target folder (the teacher).")],
    draft: Annotated[Path, typer.Option(help="Draft folder to start from.")],
    out: Annotated[Path, typer.Option(help="Folder for the re-distilled draft.")],
    prompts: Annotated[Optional[Path], typer.Option(
        help="Prompts: a JSON list, a prompts.json or JSON lines (default: the kit's training text).")
    ] = None,
    steps: Annotated[int, typer.Option(min=1, help="Training steps.")] = 200,
    replay: Annotated[float, typer.Option(min=0.0, max=0.99, help=(
        "Share of batches from the kit's training text (0.5 works), so the draft keeps the domains the "
        "prompts lack."))] = 0.0,
    size: Annotated[Size, typer.Option(help="Kit whose training text to use.")] = Size.full,
):
    """Distill a draft against a target (KL on the target's distribution), e.g. to refresh a stale draft."""
    from agent.kit import layout
    from agent.kit.distill import distill as run, read_prompts

    with _one_line_errors(), _bar() as bar:
        task = bar.add_task("distill", total=steps, loss="-")
        info = run(target, draft, out, prompts=read_prompts(prompts) if prompts else None,
                   kit_root=layout.kit_dir(size.value), replay=replay, steps=steps,
                   progress=lambda done, total, loss: bar.update(task, completed=done, loss=f"{loss:.3f}"))
    console.print(f"draft {info['draft_version_before']} -> {info['version']} against target "
                  f"{info['target_version']} in {info['seconds']:.0f} s (KL {info['loss']:.3f}); "
                  f"saved to {out}")


class GgufDtype(str, Enum):
    f32 = "f32"
    f16 = "f16"


@models_app.command("export-gguf", epilog="Example: specwatch models export-gguf --size full --models "
                                           "target-v1,draft --out models/")
def export_gguf(
    size: SizeOption = Size.full,
    out: Annotated[Optional[Path], typer.Option(help="Folder for the .gguf files (default KIT/gguf).")] = None,
    models: Annotated[str, typer.Option(help="Comma-separated: target-v1, draft, target-v2.")] =
        "target-v1,draft,target-v2",
    dtype: Annotated[GgufDtype, typer.Option("--dtype", help="Weight type of the matrices.")] = GgufDtype.f32,
):
    """Write the kit's models as GGUF for llama.cpp (llama architecture, byte vocabulary as "gpt2").

    Files are named MODEL-VERSION-DTYPE.gguf (VERSION = the kit's weight hash); progress goes to stderr,
    the written paths to stdout.
    """
    from agent.kit.gguf import export_kit

    with _one_line_errors():
        names = [name.strip() for name in models.split(",") if name.strip()]
        done = export_kit(size.value, out=out, models=names, dtype=dtype.value,
                          progress=lambda line: errors.print(line, highlight=False, markup=False))
    for item in done:
        print(item.path)
