"""`specwatch demo`: the main job on the embedded default (model kit + SQLite), watched live."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from agent.cli.output import Format, console, emit_rows, errors, fail
from specwatch_core import settings


class IngestMode(str, Enum):
    background = "background"
    inline = "inline"


EXAMPLE = ("Examples: specwatch demo  |  specwatch demo --quick  |  "
           "specwatch demo --db sqlite:///demo.db --no-redistill --format json")


def demo(
    db: Annotated[Optional[str], typer.Option(
        "--db", help="Database URL; default SPECWATCH_DB or sqlite:///specwatch.db.", show_default=False)] = None,
    quick: Annotated[bool, typer.Option("--quick", help="About a minute with the kit cached.")] = False,
    redistill: Annotated[bool, typer.Option(
        "--redistill/--no-redistill", help="Final phase: re-distill the draft on sampled live requests.")] = True,
    size: Annotated[str, typer.Option("--size", help="Model kit: full (the demo) or tiny (a smoke run).")] = "full",
    seed: Annotated[int, typer.Option(help="Seed of the workload and the policy.")] = 0,
    alerts_log: Annotated[Optional[Path], typer.Option(
        help="Also append alerts as JSON lines to this file.", dir_okay=False)] = None,
    threads: Annotated[int, typer.Option(
        min=0, help="Torch CPU threads for decoding (0: torch's default). One by default: models this small "
                    "gain little from a second thread and stall badly when another process holds the other "
                    "core.")] = 1,
    ingest: Annotated[IngestMode, typer.Option(
        "--ingest", help="Where the sidecar's record work runs: background (its ingest worker thread; the "
                         "decoding thread only queues each step, as in `specwatch serve`) or inline (on the "
                         "decoding thread).")] = IngestMode.background,
    fmt: Annotated[Format, typer.Option("--format", help="Summary as table, json or csv.")] = Format.table,
) -> None:
    """Serve a mixed-domain workload (code, prose, logs) through real speculative decoding of the local
    model kit, with the sidecar choosing K per step and recording everything in the database. Mid-run the
    target is updated v1 -> v2 and the draft goes stale on logs: watch StaleDraft fire and speculation
    switch off there (and stay on where it still pays). Then the draft is re-distilled against v2 on live
    requests sampled during the stale phase, and speculation comes back.

    Installs the model kit first if it is not cached (once): from the weights shipped in the repository, in
    seconds; `specwatch models build` trains it instead (6-16 minutes on 2 cores).
    """
    from rich.live import Live

    from agent.demo.plan import DemoPlan
    from agent.demo.run import Demo
    from agent.demo.view import live, summary, summary_rows
    from agent.kit import layout
    from agent.kit.load import KitNotBuiltError, load_kit
    from agent.runtime.times import iso

    if size not in ("full", "tiny"):
        raise fail(f"--size: expected full or tiny, got {size!r}")
    plan = DemoPlan(size=size, redistill=redistill, seed=seed, background=ingest is IngestMode.background)
    plan = plan.quick() if quick else plan
    # json and csv go to stdout alone (for a pipe or a file): the progress and live view then go to stderr
    screen = console if fmt is Format.table else errors
    manifest = layout.read_manifest(layout.kit_dir(size))
    if manifest is None or not manifest.get("complete"):
        from agent.cli.models import Size, build_to
        from agent.kit.shipped import manifest_for
        from agent.kit.specs import get_spec

        how = ("from the weights shipped in the repository" if manifest_for(get_spec(size)) else
               "by training it (no shipped weights for this kit spec)")
        screen.print(f"[bold]installing the {size} model kit first[/] {how} (once; cached under {settings.home()})")
        build_to(Size(size), False, screen, shipped=True)
    try:
        kit = load_kit(size, device=settings.device())
    except KitNotBuiltError as exc:
        raise fail(str(exc))
    if threads:
        import torch

        torch.set_num_threads(threads)
    url = db or settings.db_url()
    with Live(console=screen, refresh_per_second=4, transient=False) as view:
        runner = Demo(plan, kit, url, home=settings.home(), alerts_log=alerts_log,
                      redraw=lambda: view.update(live(runner)))
        try:
            result = runner.run()
        except KeyboardInterrupt:
            view.stop()
            raise fail("interrupted; what was recorded so far is in the database", 130)
        view.update(live(runner))
    rows = summary_rows(result.tally, plan.domains)
    if fmt is not Format.table:
        emit_rows(rows, fmt) if fmt is Format.csv else print(json.dumps({
            "rows": rows, "versions": result.versions, "pod": result.pod, "distill": result.distill,
            "alerts": [a.to_dict() for a in result.alerts], "hot_path": result.hot_path,
            "plot_command": result.plot_command()}, indent=2))
        return
    console.print(summary(result.tally, plan.domains))
    if result.alerts:
        console.print(f"[bold]alerts raised during the run[/] (specwatch alerts --db {url} --state all --since "
                      f"{iso(result.started)}):", highlight=False)
        for a in result.alerts:
            console.print(f"  {a.labels['alertname']:<20} {a.labels.get('domain', ''):<6} {a.state:<8} "
                          f"{a.annotations.get('summary', '')}", highlight=False)
    if result.hot_path:
        h = result.hot_path
        worker = h["worker_cpu_us_per_step"]
        console.print(f"sidecar hot path on the decoding thread (record + decide): median {h['median_us']:.1f} us, "
                      f"p99 {h['p99_us']:.1f} us over {h['steps']} steps"
                      + ("" if worker is None else f"; the ingest worker spent {worker:.1f} us of CPU per step"),
                      highlight=False)
    console.print(f"took {result.ended - result.started:.0f} s; every step is in {result.db} (pod {result.pod}).")
    console.print("Draw the run:")
    console.print(f"  {result.plot_command()}", highlight=False, soft_wrap=True)
