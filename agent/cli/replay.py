"""``specwatch replay``: send a mix of the workload's prompt sets through an OpenAI-compatible endpoint."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from agent.cli.output import Format, emit_rows, errors, fail

EXAMPLE = (
    "Examples: through the proxy, three code requests for every chat one, json traffic taking over after "
    "a minute: specwatch replay http://127.0.0.1:8080 --mix code=3,chat=1 --shift 60s:json=4,chat=1 "
    "--duration 2m --concurrency 4 --out replay.json\n\n"
    "One llama.cpp server, 300 requests spread evenly over every domain's held-out prompts: specwatch replay "
    "http://127.0.0.1:8081 --mix code,edit,extract,chat,json,copy --requests 300\n\n"
    "specwatch serve's in-process decoder: specwatch replay http://127.0.0.1:8790 --api generate "
    "--mix edit=1,chat=1 --requests 20 --max-tokens 32")


def replay(
    url: Annotated[str, typer.Argument(help="The endpoint's base URL, e.g. http://127.0.0.1:8080.",
                                       show_default=False)],
    mix: Annotated[str, typer.Option(
        help="Domains and weights, e.g. code=3,chat=1 (a bare domain weighs 1). Domains: code, edit, "
             "extract, chat, json, copy.", show_default=False)],
    shift: Annotated[Optional[list[str]], typer.Option(
        help="A traffic shift AT:MIX, e.g. 60s:json=4,chat=1 (from 60 s on, that mix). Repeat for several.",
        show_default=False)] = None,
    requests: Annotated[Optional[int], typer.Option(
        "--requests", "-n", help="Stop after this many requests.", min=1, show_default=False)] = None,
    duration: Annotated[Optional[str], typer.Option(
        help="Stop starting requests after this long, e.g. 90s, 2m. With --requests: whichever comes first.",
        show_default=False)] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", help="Requests in flight at once.",
                                             min=1)] = 1,
    api: Annotated[str, typer.Option(
        help="chat: POST /v1/chat/completions (llama.cpp, vLLM, specwatch proxy); generate: specwatch "
             "serve's POST /v1/generate (with SPECWATCH_TOKEN as bearer token when set).")] = "chat",
    split: Annotated[str, typer.Option(
        help="Which prompts: heldout (never distilled on), train, or all.")] = "heldout",
    max_tokens: Annotated[int, typer.Option(help="New tokens per request at most.", min=1)] = 64,
    temperature: Annotated[float, typer.Option(help="Sampling temperature; 0 is greedy.", min=0.0)] = 0.0,
    model: Annotated[Optional[str], typer.Option(
        help="The body's model field (chat), for engines that check it.", show_default=False)] = None,
    template: Annotated[str, typer.Option(
        help="--api generate: chatml (SmolLM2-Instruct's template) or plain (the turns' text).")] = "chatml",
    seed: Annotated[int, typer.Option(help="Seeds the domain draws and each domain's prompt order.")] = 0,
    timeout: Annotated[float, typer.Option(help="Seconds a request may take.", min=0.1)] = 300.0,
    out: Annotated[Optional[Path], typer.Option(
        "--out", help="Write the run as JSON here: configuration, summary, phases, every request.",
        dir_okay=False, show_default=False)] = None,
    fmt: Annotated[Format, typer.Option("--format", help="How to print the summary.")] = Format.table,
) -> None:
    """Replay the workload's prompt sets (agent/workload/data/) through an endpoint: `concurrency` requests
    in flight, each request's domain drawn from the mix in force when it starts and sent in the
    X-Specwatch-Domain header, so `specwatch proxy` routes and records it under that domain.

    Prints a progress bar, then per domain: requests, errors, generated tokens, tok/s (over the run), tok/s/req
    (over the requests' own time), median and 95th-percentile latency; then the requests per domain in each
    phase of the mix. Ctrl-C stops the run and prints what finished. Exit 1 when no request succeeded.
    """
    from agent.workload import tally
    from agent.workload.mix import MixError, parse_seconds, schedule
    from agent.workload.replay import ReplayConfig, prompt_sets_for, replay as run
    from agent.workload.requests import Sampling
    from specwatch_core import settings

    try:
        plan = schedule(mix, shift or ())
        config = ReplayConfig(
            url=url, schedule=plan, api=api, concurrency=concurrency, requests=requests,
            duration=parse_seconds(duration) if duration is not None else None,
            split=None if split == "all" else split, seed=seed, timeout=timeout,
            sampling=Sampling(max_tokens, temperature, model, template),
            token=settings.token() if api == "generate" else None)
        sets = prompt_sets_for(plan, config.split)
    except (MixError, ValueError) as exc:
        raise fail(str(exc))
    with _progress(config) as advance:
        result = run(config, sets, progress=advance)
    stopped = " (stopped early)" if result.interrupted else ""
    title = (f"replay of {url}: {len(result.results)} requests in {result.seconds:.1f} s{stopped}, "
             f"concurrency {concurrency}")
    emit_rows(tally.summary(result, plan.domains), fmt, title=title)
    if fmt is Format.table:
        emit_rows([{"phase": p["phase"], "from s": p["from_s"], "mix": p["mix"], "requests": p["requests"],
                    **p["by_domain"]} for p in tally.phases(result, plan)], fmt)
    for line in tally.errors(result):
        errors.print(f"[red]errors:[/] {line}", highlight=False)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(tally.as_json(config, result), indent=1) + "\n")
        errors.print(f"wrote {out}", highlight=False)
    if not any(r.ok for r in result.results):
        raise typer.Exit(1)


@contextlib.contextmanager
def _progress(config):
    """A progress bar on stderr counting requests (or seconds, for a run bounded by time only) and errors;
    yields the callback that takes each result."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    by_count = config.requests is not None
    count = MofNCompleteColumn() if by_count else TextColumn("{task.completed:.0f}/{task.total:.0f} s")
    began, failed = time.monotonic(), 0
    with Progress(TextColumn("replay"), BarColumn(), count, TextColumn("{task.fields[errors]} errors"),
                  TimeElapsedColumn(), console=errors) as progress:
        task = progress.add_task("replay", total=config.requests if by_count else config.duration, errors=0)

        def advance(result) -> None:
            nonlocal failed
            failed += not result.ok
            if by_count:
                progress.update(task, advance=1, errors=failed)
            else:
                progress.update(task, completed=min(time.monotonic() - began, config.duration), errors=failed)

        yield advance
