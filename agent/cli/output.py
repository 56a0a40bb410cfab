"""What the CLI's commands share: the consoles, the output formats, the one-line error and the rows printer. It
imports no other module of agent/cli/, so the package root and every command module import it without a cycle."""

from __future__ import annotations

import json
import sys
from enum import Enum

import typer
from rich.console import Console

console = Console()
errors = Console(stderr=True)


class Format(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print a one-line error and return the Exit to raise."""
    errors.print(f"[red]error:[/] {message}", highlight=False)
    return typer.Exit(code)


def emit_rows(rows: list[dict], fmt: Format, title: str | None = None, drop: tuple[str, ...] = (),
              wrap: str | None = None) -> None:
    """Print rows as a rich table, JSON or CSV (the same columns in every format). The table fits the
    terminal (agent/cli/fit_table.py): columns in ``drop`` leave first to last when it would not, and ``wrap``
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
    from agent.cli.fit_table import fitted

    numeric = [bool(rows) and _numeric(rows[0][c]) for c in columns]
    cells = [[_cell(row[c]) for c in columns] for row in rows]
    console.print(fitted(rows, cells, numeric, console.width, drop, wrap, title))


def _numeric(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 100 else f"{value:.1f}"
    return "" if value is None else str(value)
