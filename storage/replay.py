"""Adding the unwritten rows of a dead-letter file back to the database (`specwatch db replay`).

A row let go of ``unwritten`` (storage/deadletter.py) holds the whole running total of its window and series
at that moment; the database may hold an earlier, partial total of the same window (an earlier flush wrote
it), or the same one (a flush the database held completed after all). So a row is written where the
database holds none or fewer steps, and skipped where it holds as many or more: replaying a file twice
stores nothing twice. Where the window's hour is packed, the database's total is its block's bucket (or a
late row beside it, which wins): a replayed row replaces it only when it holds more steps, as anywhere else.
Rows the database refused are left out (it would refuse them again) and counted.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from storage import schema
from storage.counts import WindowCounts
from storage.deadletter import UNWRITTEN
from storage.engine import Database
from storage.tierread import merged_rows
from storage.tiers import Tier
from storage.writer import SERIES_COLUMNS, WindowEntry, resolve_series, write_windows

COUNTS = ("steps", "emitted", "draft_seconds", "verify_seconds", "expected_sum", "expected_n", "drafted",
          "accepted")


def read(path: Path) -> tuple[list[WindowEntry], Counter]:
    """The unwritten rows of a dead-letter file as window entries, and what was left out (``refused``, or
    ``unreadable``: a line that is not such a row)."""
    entries: list[WindowEntry] = []
    left: Counter = Counter()
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if row.get("reason", "refused") != UNWRITTEN:  # rows from before reasons were written: refused
                left["refused"] += 1
                continue
            key = tuple(row[c] for c in SERIES_COLUMNS)
            counts = WindowCounts(int(row["lookahead"]), **{c: row[c] for c in COUNTS}, hist=list(row["hist"]))
            entries.append((int(row["bucket_start"]), key, counts))
        except (ValueError, KeyError, TypeError):
            left["unreadable"] += 1
    return entries, left


def replay(db: Database, entries: list[WindowEntry], window_seconds: int) -> tuple[int, int]:
    """Write the entries the database holds fewer steps of; (written, skipped). One transaction."""
    if not entries:
        return 0, 0
    windows = Tier("window", window_seconds, 0, schema.windows, schema.window_blocks)
    with db.write() as conn:
        ids = resolve_series(conn, {key for _, key, _ in entries}, {})
        held: dict[tuple[int, int], int] = {}
        for start, series_id in {(start, ids[key]) for start, key, _ in entries}:
            stored = merged_rows(conn, windows, start, start + window_seconds, (series_id, series_id + 1))
            values = stored.get((start, series_id))
            held[(start, series_id)] = -1 if values is None else int(values[0])  # steps
        todo: dict[tuple[int, int], WindowEntry] = {}
        for entry in entries:  # the largest total of a window, when a file holds it twice
            start, key, counts = entry
            slot = (start, ids[key])
            if counts.steps > held[slot] and (slot not in todo or todo[slot][2].steps < counts.steps):
                todo[slot] = entry
        if todo:
            write_windows(conn, list(todo.values()), window_seconds, ids)
    return len(todo), len(entries) - len(todo)
