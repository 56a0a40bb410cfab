"""`specwatch models pretrained`: a real pretrained model (from its Python package) prepared for every engine."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from agent.cli.models import _bar, console, errors, models_app

EXAMPLE = ("Example: specwatch models pretrained            # SmolLM2-135M-Instruct: GGUF, transformers "
           "checkpoint, distilled draft\n\n"
           "         specwatch models pretrained --distill --ship  # rebuild the draft (needs make engine)\n\n"
           "         specwatch models pretrained --distill --from-draft --steps 200  # the installed one, further\n\n"
           "         specwatch models pretrained --lora-v2         # train target v2's LoRA adapter (minutes)")


@models_app.command(epilog=EXAMPLE)
def pretrained(
    name: Annotated[str, typer.Option("--name", help="Model: smollm2-135m.")] = "smollm2-135m",
    hf: Annotated[bool, typer.Option("--hf/--no-hf", help="Write the transformers checkpoint (~40 s once).")] = True,
    draft: Annotated[bool, typer.Option("--draft/--no-draft", help="Install the shipped distilled draft.")] = True,
    distill: Annotated[bool, typer.Option("--distill", help=(
        "Distil a new draft: the target's answers from llama-server, then training (minutes).")) ] = False,
    steps: Annotated[int, typer.Option(min=1, help="Training steps with --distill.")] = 600,
    per_domain: Annotated[int, typer.Option(min=1, help=(
        "With --distill: training prompts a workload domain the target answers for the draft.")) ] = 64,
    from_draft: Annotated[bool, typer.Option("--from-draft/--fresh", help=(
        "With --distill: train the installed draft further instead of a fresh one.")) ] = False,
    lora_v2: Annotated[bool, typer.Option("--lora-v2", help=(
        "Train target v2: a LoRA adapter that answers log lines in a new format, other domains unchanged; "
        "written for transformers and as GGUF for llama-server --lora.")) ] = False,
    lora_steps: Annotated[int, typer.Option(min=1, help="Training steps with --lora-v2.")] = 60,
    ship: Annotated[bool, typer.Option("--ship", help=(
        "With --distill or --lora-v2: write the draft or the adapter into the repository.")) ] = False,
):
    """Install a real pretrained model from its package and prepare it under SPECWATCH_HOME/pretrained/NAME:
    the GGUF for llama.cpp (as shipped, quantized), a transformers checkpoint, the draft specwatch distilled
    for it (GGUF with the target's tokenizer, and transformers), and target v2's LoRA adapter when one is
    shipped (docs/real-model.md, "Target v2")."""
    from agent.pretrained.prepare import prepare
    from agent.pretrained.source import ModelMissingError

    say = lambda line: errors.print(line, highlight=False)  # noqa: E731 - progress on stderr
    try:
        prepared = prepare(name, hf=hf or distill or lora_v2, draft=(draft and not distill) or from_draft, say=say)
        if distill:
            from agent.pretrained.rebuild import rebuild_draft

            with _bar(errors) as bar:
                data = bar.add_task("teacher", total=None, loss="-")
                task = bar.add_task("draft", total=steps, loss="-")
                start = prepared.draft if from_draft else None
                if from_draft and start is None:
                    raise ValueError("--from-draft: no draft is installed for this model (run without --fresh "
                                     "first, or use --fresh)")
                info = rebuild_draft(prepared, steps=steps, ship_it=ship, per_domain=per_domain, start=start,
                                     say=say,
                                     data_progress=lambda d, n: bar.update(data, completed=d, total=n),
                                     progress=lambda d, n, loss: bar.update(task, completed=d, loss=f"{loss:.3f}"))
            if ship:
                prepared = prepare(name, hf=True, draft=True, say=say)
            console.print(f"draft {info['version']}: loss {info['loss']}, {info['train_seconds']:.0f} s")
        if lora_v2:
            prepared = _train_v2(prepared, lora_steps, ship, say)
    except (ModelMissingError, ValueError, OSError, RuntimeError) as exc:
        errors.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        errors.print("interrupted; run the same command again to resume")
        raise typer.Exit(130) from None
    table = Table(title=f"{prepared.name} ({prepared.root})")
    table.add_column("file")
    table.add_column("version")
    table.add_column("path")
    table.add_row("target GGUF", prepared.target_version, str(prepared.target_gguf))
    if prepared.hf is not None:
        table.add_row("target transformers", "", str(prepared.hf))
    if prepared.draft_gguf is not None:
        table.add_row("draft GGUF", prepared.draft_version or "", str(prepared.draft_gguf))
        table.add_row("draft transformers", prepared.draft_version or "", str(prepared.draft))
    if prepared.lora_gguf is not None:
        table.add_row("target v2 LoRA GGUF", prepared.lora_version or "", str(prepared.lora_gguf))
        table.add_row("target v2 LoRA (PEFT)", prepared.lora_version or "", str(prepared.lora))
    console.print(table)


def _train_v2(prepared, steps: int, ship: bool, say):
    from agent.pretrained.prepare import Prepared
    from agent.pretrained.target_v2 import build_v2

    with _bar(errors) as bar:
        data = bar.add_task("v1 answers", total=None, loss="-")
        task = bar.add_task("adapter", total=steps, loss="-")
        info = build_v2(prepared, steps=steps, say=say,
                        data_progress=lambda d, n: bar.update(data, completed=d, total=n),
                        progress=lambda d, n, loss: bar.update(task, completed=d, loss=f"{loss:.3f}"))
    if ship:
        from agent.pretrained.v2_ship import ship as ship_adapter

        ship_adapter(prepared.name, prepared.root / info["adapter"], prepared.target_version)
    t = info["training"]
    console.print(f"target v2 adapter {info['version']}: loss {t['loss']}, trained in {t['train_seconds']:.0f} s "
                  f"({t['seconds']:.0f} s in all)")
    return Prepared.read(prepared.name, prepared.root.parent.parent)
