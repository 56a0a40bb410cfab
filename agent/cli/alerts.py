"""``specwatch alerts``: alerts stored by the sidecars, as a table, JSON or CSV."""

from __future__ import annotations

import json
import time
from enum import Enum
from typing import Annotated, Any, Optional

import typer

from agent.cli.output import Format, console, emit_rows, fail
from agent.cli.stats import DbOption, open_store
from agent.runtime.times import iso, parse_time
from storage import StoredAlert, StoreError

EXAMPLE = "Example: specwatch alerts --db sqlite:///specwatch.db --state all --since 24h --format json"


class State(str, Enum):
    firing = "firing"
    resolved = "resolved"
    all = "all"


def alerts(
    db: DbOption = None,
    state: Annotated[State, typer.Option(help="firing, resolved or all.")] = State.firing,
    domain: Annotated[Optional[str], typer.Option(help="Only this domain.")] = None,
    since: Annotated[Optional[str], typer.Option(
        help="Only alerts active at some time since: a span back from now (30m, 24h, 7d) or an ISO time.")
    ] = None,
    fmt: Annotated[Format, typer.Option("--format", help="table, json or csv.")] = Format.table,
) -> None:
    """Alerts oldest first: labels (alertname, domain, severity, pod), state, start and end (ISO 8601 UTC)
    and summary; JSON and CSV add every annotation (versions, acceptance before/after, action)."""
    try:
        start = parse_time(since, time.time()) if since else None
    except ValueError as exc:
        raise fail(str(exc))
    store = open_store(db)
    try:
        stored = store.load_alerts(state.value)
    except StoreError as exc:
        raise fail(str(exc))
    finally:
        store.close(flush=False)
    chosen = [a for a in stored if (domain is None or a.labels.get("domain") == domain)
              and (start is None or a.ends_at is None or a.ends_at >= start)]
    if not chosen and fmt is Format.table:
        where = f" in domain {domain}" if domain else ""
        when = f" since {iso(start)}" if start is not None else ""
        console.print(f"no {'' if state is State.all else state.value + ' '}alerts{where}{when}", highlight=False)
        return
    emit_rows([row(a, fmt) for a in chosen], fmt, title=f"{state.value} alerts", drop=("pod", "ends_at", "severity"),
              wrap="summary")


def row(alert: StoredAlert, fmt: Format) -> dict[str, Any]:
    """One alert for people: labels, state, ISO times, summary (and the annotations outside tables)."""
    labels = alert.labels
    out: dict[str, Any] = {
        "alertname": labels.get("alertname", ""), "domain": labels.get("domain", ""),
        "severity": labels.get("severity", ""), "pod": labels.get("pod", ""), "state": alert.state,
        "starts_at": when(alert.starts_at, fmt), "ends_at": None if alert.ends_at is None else when(alert.ends_at, fmt),
        "summary": alert.annotations.get("summary", ""),
    }
    if fmt is Format.json:
        out["annotations"] = alert.annotations
    elif fmt is Format.csv:
        out["annotations"] = json.dumps(alert.annotations, sort_keys=True)
    return out


def when(ts: float, fmt: Format) -> str:
    """ISO 8601 (UTC) in CSV and JSON; month, day and time in a table, whose header says UTC."""
    return iso(ts) if fmt is not Format.table else iso(ts)[5:].replace("T", " ").rstrip("Z")
