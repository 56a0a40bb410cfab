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
           "specwatch demo --db sqlite:///demo.db --no-redistill --format json  |  specwatch demo --real")


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
    real: Annotated[bool, typer.Option(
        "--real", help="The same story on the real model (SmolLM2-135M, `make real`) through llama.cpp "
                       "(`make engine`) and `specwatch proxy`: pools off, k3 (draft) and k8 (n-gram), replayed "
                       "mixed traffic, the guard on the live prompt sample before the update, re-distillation "
                       "from it after; about 5 minutes. --db, --size, --threads and --ingest do not apply (the "
                       "proxy keeps its own database beside the run's files).")] = False,
) -> None:
    """Serve a mixed-domain workload (code, prose, logs) through real speculative decoding of the local
    model kit, with the sidecar choosing K per step and recording everything in the database. Mid-run the
    target is updated v1 -> v2 and the draft goes stale on logs: watch StaleDraft fire and speculation
    switch off there (and stay on where it still pays). Then the draft is re-distilled against v2 on live
    requests sampled during the stale phase, and speculation comes back.

    Installs the model kit first if it is not cached (once): from the weights shipped in the repository, in
    seconds; `specwatch models build` trains it instead (6-16 minutes on 2 cores).
    """
    from agent.cli.models import Size, build_to
    from agent.demo.plan import DemoPlan
    from agent.demo.view import print_result, result_json, summary_rows
    from agent.demo.watch import Interrupted, watch
    from agent.kit.load import KitNotBuiltError

    if real:
        return _real(quick, fmt)
    if size not in ("full", "tiny"):
        raise fail(f"--size: expected full or tiny, got {size!r}")
    plan = DemoPlan(size=size, redistill=redistill, seed=seed, background=ingest is IngestMode.background)
    plan = plan.quick() if quick else plan
    try:
        # json and csv go to stdout alone (for a pipe or a file): the progress and live view then go to stderr
        result = watch(plan, db or settings.db_url(), screen=console if fmt is Format.table else errors,
                       install=lambda kit_size, out: build_to(Size(kit_size), False, out, shipped=True),
                       alerts_log=alerts_log, threads=threads)
    except KitNotBuiltError as exc:
        raise fail(str(exc))
    except Interrupted:
        raise fail("interrupted; what was recorded so far is in the database", 130)
    if fmt is Format.table:
        print_result(console, result, plan.domains)
    elif fmt is Format.csv:
        emit_rows(summary_rows(result.tally, plan.domains), fmt)
    else:
        print(json.dumps(result_json(result, plan.domains), indent=2))


def _real(quick: bool, fmt: Format) -> None:
    from dataclasses import asdict

    from agent.demo.real_run import RealPlan
    from agent.demo.real_view import print_real, run_real
    from agent.demo.real_world import WorldOptions
    from agent.engines.llamacpp import LlamaServerError
    from agent.pretrained.prepare import ModelMissingError

    plan = RealPlan(phase1=40.0, phase2=40.0, phase3=30.0) if quick else RealPlan()
    try:
        result = run_real(plan, WorldOptions(), console if fmt is Format.table else errors)
    except (ModelMissingError, FileNotFoundError, LlamaServerError) as exc:
        raise fail(str(exc))
    except KeyboardInterrupt:
        raise fail("interrupted", 130)
    if fmt is Format.table:
        print_real(console, result)
    elif fmt is Format.csv:
        emit_rows([{k: v for k, v in r.items() if k != "pool_counts"} for r in result.rows], fmt)
    else:
        print(json.dumps(asdict(result), indent=2))
