"""Writing window rows so that one bad row cannot take good ones down.

A flush writes every changed row in one transaction. If the database refuses it (a value outside a
column's range, a constraint), the rows are split in halves and each half is written on its own, down to
single rows: every good row is stored, and each row the database refuses is appended to a dead-letter file
(JSON lines) and logged. A database that cannot be reached (refused connection, timeout, lock) is not a
bad row: the rows stay in memory for the next flush and the error is raised.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa

from storage import deadletter
from storage.engine import Database
from storage.writer import Known, WindowEntry, write_windows

log = logging.getLogger(__name__)


def refused(exc: BaseException) -> bool:
    """True when the database refused the rows themselves, so retrying them cannot help; False for
    anything else (unreachable, timed out, locked, out of disk): retry later."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, (sa.exc.DataError, sa.exc.IntegrityError)):
            return True
        if isinstance(seen, sa.exc.SQLAlchemyError):
            return False
        if isinstance(seen, (OverflowError, ValueError, TypeError)):  # a driver refusing to bind a value
            return True
        seen = seen.__cause__
    return False


@dataclass
class Outcome:
    """What a flush did with its rows: ``written`` and ``dead`` are done with; ``error`` (the database is
    unreachable) means the rest is still to be written."""

    written: list[WindowEntry] = field(default_factory=list)
    dead: list[WindowEntry] = field(default_factory=list)
    error: BaseException | None = None


def write_all(db: Database, entries: Sequence[WindowEntry], window_seconds: int, known: Known,
              remember: Callable[[dict], None], dead_letter: Path) -> Outcome:
    """Write ``entries``, splitting on refusal; ``remember`` gets the series ids of each committed part."""
    outcome = Outcome()
    todo = [list(entries)]
    while todo and outcome.error is None:
        part = todo.pop()
        try:
            with db.write() as conn:
                ids = write_windows(conn, part, window_seconds, known)
            remember(ids)  # only after commit: a rolled-back id may be reused
            outcome.written += part
        except Exception as exc:  # noqa: BLE001 - sorted below: a refused row, or the database is away
            if not refused(exc):
                outcome.error = exc
            elif len(part) > 1:
                half = len(part) // 2
                todo += [part[half:], part[:half]]  # the first half is written first
            else:
                append_dead(dead_letter, part[0], exc)
                outcome.dead += part
    return outcome


def append_dead(path: Path, entry: WindowEntry, exc: BaseException) -> None:
    """One line in the dead-letter file for a window row the database refused; one log line saying where."""
    error = deadletter.error_text(exc)
    failed = deadletter.append(path, [entry], deadletter.REFUSED, error)
    start, key, c = entry
    log.error("the database refused a window row (bucket %s, domain %r, %d steps): %s; dead-lettered to %s",
              start, key[1], c.steps, error, path if failed is None else f"nowhere ({failed})")
