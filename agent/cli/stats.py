"""``specwatch stats``: acceptance history from the store, as a table, JSON or CSV, and optionally a plot."""

from __future__ import annotations

import time
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from agent.cli.output import Format, console, emit_rows, errors, fail
from agent.runtime.times import iso, parse_time, span
from specwatch_core import settings
from storage import DIMENSIONS, StatsQuery, StatsResult, Store, StoreConfig, StoreError
from storage.query import TIME_DIMS

EXAMPLE = ("Examples: specwatch stats --db sqlite:///specwatch.db --domain code --since 7d --by hour  |  "
           "specwatch stats --since 24h --by domain --by lookahead --by load")
By = Enum("By", {d: d for d in DIMENSIONS}, type=str)
DbOption = Annotated[Optional[str], typer.Option(
    "--db", help="Database URL; default SPECWATCH_DB or sqlite:///specwatch.db.", show_default=False)]


def open_store(db: str | None, migrate_schema: bool = False, config: StoreConfig | None = None) -> Store:
    """Open the store for a command, turning failures into a one-line error."""
    try:
        return Store.open(db or settings.db_url(), config, migrate_schema=migrate_schema)
    except StoreError as exc:
        raise fail(str(exc))


def stats(
    db: DbOption = None,
    domain: Annotated[Optional[str], typer.Option(help="Only this domain.")] = None,
    since: Annotated[Optional[str], typer.Option(
        help="Start: a span back from now (30m, 24h, 7d) or an ISO time; default all history.")] = None,
    until: Annotated[Optional[str], typer.Option(help="End, like --since; default now.")] = None,
    by: Annotated[Optional[list[By]], typer.Option(
        help="Group by (repeat to combine): " + ", ".join(DIMENSIONS) + ". Default: domain.")] = None,
    fmt: Annotated[Format, typer.Option("--format", help="table, json or csv.")] = Format.table,
    plot: Annotated[Optional[Path], typer.Option(
        help="Also draw acceptance over time per domain into this PNG.", dir_okay=False)] = None,
) -> None:
    """Acceptance rate (accepted / drafted), accepted tokens and tokens per step, steps, draft and verify
    time per step, and the speed-up over K = 0 where the range has K = 0 steps.

    Times are UTC. Each part of the range comes from the coarsest tier that holds it exactly (days,
    hours, minutes, windows). --by position: conditional acceptance at each drafted position. --by load:
    requests by the load they met (requests in flight on their pool as the proxy sent them: 1, 2, 3-4, 5-8,
    ...), an hour at a time, with tokens per second of their steps and the speed-up over K = 0 at the same
    load; it combines with domain, lookahead, target_version, draft_version and pod.
    """
    now = time.time()
    try:
        query = StatsQuery(since=parse_time(since, now) if since else None,
                           until=parse_time(until, now, "--until") if until else None,
                           by=tuple(b.value for b in by or [By.domain]), domain=domain)
    except (ValueError, StoreError) as exc:
        raise fail(str(exc))
    store = open_store(db)
    try:
        result = store.stats(query)
        history = store.history(query.since, query.until, domain) if plot else None
    except StoreError as exc:
        raise fail(str(exc))
    finally:
        store.close(flush=False)
    rows = [display(row) for row in result.rows]
    if rows or fmt is not Format.table:
        emit_rows(rows, fmt, title=_title(result, domain),
                  drop=("expected_acceptance", "draft_ms", "verify_ms", "mean_accepted", "target_version",
                        "draft_version"))
    else:
        console.print(f"no steps recorded in {_range(result)}", highlight=False)
    for start, end in result.plan.missing:
        errors.print(f"note: history for {iso(start)} .. {iso(end)} was pruned; not included", highlight=False)
    if plot:
        from agent.cli.plot import render

        render(history, plot)
        errors.print(f"wrote {plot}", highlight=False)


def display(row: dict[str, Any]) -> dict[str, Any]:
    """A stats row for people: ISO times, milliseconds."""
    out = {}
    for key, value in row.items():
        if key in TIME_DIMS:
            out[key] = iso(value)
        elif key == "seconds_per_step":  # --by load
            out["step_ms"] = None if value is None else value * 1000
        elif key.endswith("_seconds_per_step"):
            out[key.replace("_seconds_per_step", "_ms")] = None if value is None else value * 1000
        elif key in ("drafted", "accepted") and "acceptance_rate" in row:
            continue  # the ratios carry them; the position view keeps its counts
        else:
            out[key] = value
    return out


def _range(result: StatsResult) -> str:
    return f"{iso(result.plan.since)} .. {iso(result.plan.until)}"


TIER_WORDS = {"window": "windows", "minute": "minute rows", "hour": "hour rows", "load_hour": "hour rows by load"}


def _title(result: StatsResult, domain: str | None) -> str:
    """In words: what, where, when, and which stored rows answered (for how long a stretch each)."""
    tiers = " and ".join(f"{TIER_WORDS.get(tier, tier)} ({span(s)})" for tier, s in result.plan.tiers_used().items())
    where = f" in {domain}" if domain else ""
    when = f"{iso(result.plan.since)} to {iso(result.plan.until)}".replace("T", " ").replace("Z", "")
    return (f"Acceptance by {' and '.join(result.by)}{where}, {when} UTC" +
            (f"\nfrom {tiers}" if tiers else "\nno stored rows in this range"))
