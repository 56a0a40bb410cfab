"""``specwatch decode``: decode held-out prompts of the model kit, target alone vs speculative."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from agent.cli.output import Format, console, emit_rows, fail


def decode(
    size: Annotated[str, typer.Option(help="Model kit size (see `specwatch models build`).")] = "full",
    domain: Annotated[Optional[list[str]], typer.Option(help="Domain(s) to decode; default all.")] = None,
    target: Annotated[str, typer.Option(help="Which kit target: v1, or v2 (the updated target, "
                                             "against which the draft is stale).")] = "v1",
    prompt: Annotated[Optional[str], typer.Option(help="Your own prompt instead of the held-out one.")] = None,
    lookahead: Annotated[int, typer.Option("--lookahead", "-k", min=0, max=32,
                                           help="Draft tokens per step (K).")] = 4,
    max_tokens: Annotated[int, typer.Option(min=1, help="New tokens per prompt.")] = 160,
    temperature: Annotated[float, typer.Option(min=0.0, help="0 = greedy.")] = 0.0,
    seed: Annotated[Optional[int], typer.Option(help="Seed for sampling.")] = 0,
    device: Annotated[str, typer.Option(help="auto (CUDA when present), cpu, cuda:N.")] = "auto",
    fmt: Annotated[Format, typer.Option("--format", help="table, json or csv.")] = Format.table,
    show_text: Annotated[bool, typer.Option(help="Print the generated text.")] = True,
) -> None:
    """Decode a held-out prompt per domain with the target alone, then speculatively.

    Shows the generated text, acceptance rate, tokens per step and tokens/s of both runs.
    """
    from agent.decoding.decoder import SpeculativeDecoder
    from agent.decoding.showcase import compare
    from agent.kit import tokenizer
    from agent.kit.load import KitNotBuiltError, load_kit

    if target not in ("v1", "v2"):
        raise fail(f"--target: expected v1 or v2, got {target!r}")
    try:
        with console.status(f"loading the {size} model kit ..."):
            kit = load_kit(size, device=device)
    except (KitNotBuiltError, ValueError) as exc:
        raise fail(str(exc))
    domains = domain or kit.domains
    unknown = sorted(set(domains) - set(kit.domains))
    if unknown:
        raise fail(f"--domain: unknown {unknown[0]!r}; the kit has {', '.join(kit.domains)}")
    model = kit.target_v1 if target == "v1" else kit.target_v2
    decoder = SpeculativeDecoder(model, kit.draft, temperature=temperature, seed=seed,
                                 target_version=kit.versions[f"target-{target}"],
                                 draft_version=kit.versions["draft"])
    prompts = {d: tokenizer.encode(prompt) if prompt else kit.prompt_ids(d)[0] for d in domains}

    def show(run) -> None:
        if show_text and fmt is Format.table:
            console.rule(f"[bold]{run.domain}[/]")
            console.print(tokenizer.decode(run.prompt)[-200:], style="dim", end="", markup=False,
                          highlight=False)
            console.print(tokenizer.decode(run.tokens), style="bold green", markup=False, highlight=False)

    try:
        runs = compare(decoder, prompts, max_tokens, lookahead, on_done=show)
    except ValueError as exc:
        raise fail(str(exc))
    emit_rows([{"domain": r.domain, "K": lookahead, "accept": round(r.acceptance_rate, 4),
                "tok/step": round(r.tokens_per_step, 3), "target tok/s": round(r.target_only_tps, 1),
                "spec tok/s": round(r.speculative_tps, 1), "speedup": round(r.speedup, 3),
                "same text": r.identical} for r in runs], fmt,
              title=f"target {target} ({kit.versions[f'target-{target}']}) with draft "
                    f"{kit.versions['draft']}, K={lookahead}")
