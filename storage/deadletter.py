"""The dead-letter file: window rows the database did not take, one JSON object per line.

Two kinds of row go there (``reason``): ``refused``, a row the database refused (a value out of a column's
range, a constraint; retrying cannot help), and ``unwritten``, a row the store still held when it had to let
go of it: the process shutting down while the database did not answer, or more rows held than
``StoreConfig.max_unwritten`` while it was away. Each line carries the row's window start, series and
counts, when it was written and why (docs/durability.md).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path

from storage.counts import accepted_tokens, drafted_tokens
from storage.engine import Database
from storage.pending import PendingWindows
from storage.writer import SERIES_COLUMNS, WindowEntry

log = logging.getLogger(__name__)
REFUSED, UNWRITTEN = "refused", "unwritten"


def row(entry: WindowEntry, reason: str, error: str) -> dict:
    """The JSON object of one window row."""
    start, key, c = entry
    return {"dead_lettered_at": time.time(), "reason": reason, "bucket_start": start,
            **dict(zip(SERIES_COLUMNS, key)), "steps": c.steps, "drafted": drafted_tokens(c),
            "accepted": accepted_tokens(c), "emitted": c.emitted, "hist": c.hist, "expected_n": c.expected_n,
            "expected_sum": c.expected_sum, "draft_seconds": c.draft_seconds, "verify_seconds": c.verify_seconds,
            "error": error}


def append(path: Path, entries: Sequence[WindowEntry], reason: str, error: str) -> str | None:
    """Append ``entries`` to the file; None when written, else why they could not be (the rows are then
    logged instead, one line each, so they are not gone without a trace)."""
    lines = [json.dumps(row(e, reason, error), default=str) for e in entries]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as out:
            out.write("".join(line + "\n" for line in lines))
            out.flush()
    except OSError as io:
        for line in lines:
            log.error("a window row that could not be dead-lettered: %s", line)
        return f"{path}: {io}"
    return None


def error_text(exc: BaseException) -> str:
    """An exception as one short line."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def spill(pending: PendingWindows, keep: int, path: Path, reason: str) -> tuple[list[WindowEntry], str | None]:
    """Let go of the oldest unwritten rows of ``pending`` down to ``keep``: append them to ``path`` and forget
    them. Returns (the rows, None or why the file could not take them); one log line either way."""
    entries = pending.unwritten()  # oldest first
    gone = entries[:max(0, len(entries) - keep)]
    if not gone:
        return [], None
    failed = append(path, gone, UNWRITTEN, reason)
    pending.forget([(start, key) for start, key, _ in gone])
    steps = sum(c.steps for _, _, c in gone)
    if failed is None:
        log.error("%d unwritten window rows (%d steps) dead-lettered to %s: %s", len(gone), steps, path, reason)
    else:
        log.error("%d unwritten window rows (%d steps) LOST (%s): no dead-letter file: %s", len(gone), steps,
                  reason, failed)
    return gone, failed


def path_for(configured: str | None, db: Database) -> Path:
    """The dead-letter file: the configured path, else beside a SQLite file, else under SPECWATCH_HOME."""
    if configured:
        return Path(configured)
    database = db.engine.url.database
    if db.dialect == "sqlite" and database and database != ":memory:":
        return Path(f"{database}.dead-letter.jsonl")
    from specwatch_core import settings  # SPECWATCH_* are read in one place

    return settings.home() / "dead-letter.jsonl"
