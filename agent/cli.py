"""The ``specwatch`` command line: thin commands that build objects and call one library function."""

from __future__ import annotations

import json
import logging
import sys
import warnings
from enum import Enum

import typer
from rich.console import Console

app = typer.Typer(
    name="specwatch",
    help="Watch, tune and switch speculative decoding per domain.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="markdown",
)
console = Console()
errors = Console(stderr=True)


class Format(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


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


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print a one-line error and return the Exit to raise."""
    errors.print(f"[red]error:[/] {message}", highlight=False)
    return typer.Exit(code)


def emit_rows(rows: list[dict], fmt: Format, title: str | None = None, drop: tuple[str, ...] = (),
              wrap: str | None = None) -> None:
    """Print rows as a rich table, JSON or CSV (the same columns in every format). The table fits the
    terminal (agent/fit_table.py): columns in ``drop`` leave first to last when it would not, and ``wrap``
    (free text) wraps instead of being cut."""
    if fmt is Format.json:
        print(json.dumps(rows, indent=2))
        return
    columns = list(rows[0]) if rows else []
    if fmt is Format.csv:
        import csv

        writer = csv.DictWriter(sys.stdout, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
        return
    from agent.fit_table import fitted

    numeric = [bool(rows) and _numeric(rows[0][c]) for c in columns]
    cells = [[_cell(row[c]) for c in columns] for row in rows]
    console.print(fitted(rows, cells, numeric, console.width, drop, wrap, title))


def _numeric(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 100 else f"{value:.1f}"
    return "" if value is None else str(value)


def _register() -> None:
    from agent import cli_alerts, cli_db, cli_demo, cli_proxy, cli_recommend, cli_serve, cli_stats
    from agent.cli_decode import decode
    from agent.cli_models import models_app
    from agent.cli_scrape import EXAMPLE as SCRAPE_EXAMPLE, scrape

    # One line each in `specwatch --help`; each command's own --help has the whole text.
    app.command(epilog=cli_demo.EXAMPLE, short_help="Run the story end to end on the local model kit.")(
        cli_demo.demo)
    app.command(epilog="Example: specwatch decode --domain code --lookahead 4",
                short_help="Decode one prompt per domain, target alone then speculatively.")(decode)
    app.add_typer(models_app, name="models", short_help="Build, ship, evaluate, distill and export the model kit.")
    app.command(epilog=cli_stats.EXAMPLE, short_help="Acceptance history: tables, CSV/JSON, or a plot.")(
        cli_stats.stats)
    app.command(epilog=cli_db.VERSIONS_EXAMPLE, short_help="Target and draft versions seen, per pod.")(
        cli_db.versions)
    app.command(epilog=cli_alerts.EXAMPLE, short_help="Alerts, firing or resolved, oldest first.")(cli_alerts.alerts)
    app.add_typer(cli_db.db_app, name="db", short_help="Migrate or prune the database.")
    app.command(epilog=SCRAPE_EXAMPLE, short_help="Record an engine's speculation metrics page (vLLM, llama.cpp, "
                                                  "SGLang, TensorRT-LLM).")(scrape)
    app.command(epilog=cli_serve.EXAMPLE, short_help="Run the sidecar's HTTP API beside an engine.")(cli_serve.serve)
    app.command(epilog=cli_proxy.EXAMPLE, short_help="Proxy an OpenAI-compatible engine, routing domains to "
                                                     "pools.")(cli_proxy.proxy)
    app.command("recommend", epilog=cli_recommend.EXAMPLE,
                short_help="Each engine's start-up flags from the stored history.")(cli_recommend.recommend_cmd)


LONG_RUNNING = ("serve", "proxy")


def main() -> None:
    """The console entry point. The long-running commands first restart with the system allocator, so a
    burst's memory goes back to the system (agent/memory.py); here, not in the commands, so that a command
    invoked in-process (tests, an embedding program) never replaces its caller."""
    if len(sys.argv) > 1 and sys.argv[1] in LONG_RUNNING and not {"--help", "-h"} & set(sys.argv):
        from agent import memory

        memory.restart_with_system_allocator()
    logging.getLogger("transformers").setLevel(logging.ERROR)
    # transformers 5 deprecates the past_key_values argument the decoder passes (the only one that works from
    # 4.46 on): one warning per call site on a user's screen, nothing they can act on.
    warnings.filterwarnings("ignore", message=r".*`past_key_values` is deprecated", category=FutureWarning)
    _register()
    app()


if __name__ == "__main__":
    main()
