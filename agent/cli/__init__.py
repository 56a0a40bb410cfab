"""The ``specwatch`` command line: thin commands that build objects and call one library function.

One module a command (agent/cli/alerts.py, db.py, decode.py, demo.py, guard.py, models.py, proxy.py,
recommend.py, replay.py, scrape.py, serve.py, stats.py), registered on ``app`` by ``_register`` when ``main``
runs, so that importing the package loads no command; what they share (consoles, formats, ``fail``,
``emit_rows``) is in agent/cli/output.py and re-exported here.
"""

from __future__ import annotations

import logging
import sys

import typer

from agent.cli.output import Format, console, emit_rows, errors, fail

__all__ = ["app", "main", "Format", "console", "errors", "fail", "emit_rows"]

app = typer.Typer(
    name="specwatch",
    help="Watch, tune and switch speculative decoding per domain.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="markdown",
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"specwatch {version('specwatch')}")
        except PackageNotFoundError:  # run from a checkout that was never installed
            print("specwatch (not installed)")
        raise typer.Exit()


@app.callback()
def _options(show_version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                                help="Print the version and exit.")) -> None:
    """Watch, tune and switch speculative decoding per domain."""


def _register() -> None:
    from agent.cli import alerts, db, demo, guard, proxy, recommend, replay, serve, stats
    from agent.cli import pretrained  # noqa: F401 - registers `models pretrained` on models_app
    from agent.cli.decode import decode
    from agent.cli.models import models_app
    from agent.cli.scrape import EXAMPLE as SCRAPE_EXAMPLE, scrape

    # One line each in `specwatch --help`; each command's own --help has the whole text.
    app.command(epilog=demo.EXAMPLE, short_help="Run the story end to end on the local model kit.")(demo.demo)
    app.command(epilog="Example: specwatch decode --domain code --lookahead 4",
                short_help="Decode one prompt per domain, target alone then speculatively.")(decode)
    app.add_typer(models_app, name="models", short_help="Build, ship, evaluate, distill and export the model kit.")
    app.command(epilog=stats.EXAMPLE, short_help="Acceptance history: tables, CSV/JSON, or a plot.")(stats.stats)
    app.command(epilog=db.VERSIONS_EXAMPLE, short_help="Target and draft versions seen, per pod.")(db.versions)
    app.command(epilog=alerts.EXAMPLE, short_help="Alerts, firing or resolved, oldest first.")(alerts.alerts)
    app.add_typer(db.db_app, name="db", short_help="Migrate, prune or replay dead letters into the database.")
    app.command(epilog=SCRAPE_EXAMPLE, short_help="Record an engine's speculation metrics page (vLLM, llama.cpp, "
                                                  "SGLang, TensorRT-LLM).")(scrape)
    app.command(epilog=serve.EXAMPLE, short_help="Run the sidecar's HTTP API beside an engine.")(serve.serve)
    app.command(epilog=proxy.EXAMPLE, short_help="Proxy an OpenAI-compatible engine, routing domains to "
                                                 "pools.")(proxy.proxy)
    app.command("recommend", epilog=recommend.EXAMPLE,
                short_help="Each engine's start-up flags from the stored history.")(recommend.recommend_cmd)
    app.command(epilog=replay.EXAMPLE, short_help="Replay a mix of the workload's prompt sets through an "
                                                  "OpenAI-compatible endpoint.")(replay.replay)
    app.command(epilog=guard.EXAMPLE, short_help="Predict each domain's acceptance under a new target before it "
                                                 "ships (a CI gate).")(guard.guard)


LONG_RUNNING = ("serve", "proxy")


def main() -> None:
    """The console entry point. The long-running commands first restart with the system allocator, so a
    burst's memory goes back to the system (agent/hub/memory.py); here, not in the commands, so that a command
    invoked in-process (tests, an embedding program) never replaces its caller."""
    if len(sys.argv) > 1 and sys.argv[1] in LONG_RUNNING and not {"--help", "-h"} & set(sys.argv):
        from agent.hub import memory

        memory.restart_with_system_allocator()
    logging.getLogger("transformers").setLevel(logging.ERROR)
    _register()
    app()


if __name__ == "__main__":
    main()
