"""``specwatch db migrate|prune|replay`` and ``specwatch versions``: schema, retention, the dead-letter file's
unwritten rows, and model versions seen."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agent.cli.output import Format, console, emit_rows, fail
from agent.cli.stats import DbOption, open_store
from agent.runtime import config as cfg
from agent.runtime.times import iso
from specwatch_core import settings
from storage import StoreError
from storage.engine import Database
from storage.migrate import upgrade

db_app = typer.Typer(help="The history database: schema migrations, retention, dead letters replayed.",
                     no_args_is_help=True)
VERSIONS_EXAMPLE = "Example: specwatch versions --db sqlite:///specwatch.db --format json"


@db_app.command(epilog="Example: specwatch db migrate --db postgresql://postgres@db:5432/specwatch")
def migrate(db: DbOption = None) -> None:
    """Create the schema, or migrate it up to the one this specwatch uses."""
    try:
        database = Database.open(db or settings.db_url())
        try:
            before, after = upgrade(database)
        finally:
            database.dispose()
    except StoreError as exc:
        raise fail(str(exc))
    done = "already at" if before == after else f"migrated from {before or 'empty'} to"
    console.print(f"schema {done} revision {after}", highlight=False)


@db_app.command(epilog="Example: specwatch db prune --db sqlite:///specwatch.db  (windows kept 2 h: SPECWATCH_RETAIN_WINDOWS=7200)")
def prune(db: DbOption = None,
          fmt: Annotated[Format, typer.Option("--format", help="table, json or csv.")] = Format.table) -> None:
    """Roll up what has ended, then apply retention now: delete expired rows the tier above covers.

    Retention is the sidecar's (retain_windows, retain_minutes, retain_hours, retain_days, in seconds:
    SPECWATCH_RETAIN_* or the SPECWATCH_CONFIG file); by default 7 days, 30 days, 400 days, 5 years."""
    try:
        retention = cfg.load(None, {"db": db}).store_config()
    except cfg.ConfigError as exc:
        raise fail(str(exc))
    store = open_store(db, config=retention)
    try:
        rolled = store.rollup()
        store.pack()
        deleted = store.prune()
    except StoreError as exc:
        raise fail(str(exc))
    finally:
        store.close(flush=False)
    emit_rows([{"table": t, "rows_deleted": n} for t, n in deleted.items()], fmt,
              title="retention (rolled up " + ", ".join(f"{n} {t}s" for t, n in rolled.items()) + " first)")


@db_app.command(epilog="Example: specwatch db replay ~/.cache/specwatch/dead-letter.jsonl --db postgresql://postgres@db:5432/specwatch")
def replay(file: Annotated[Path, typer.Argument(help="A dead-letter file (JSON lines).", exists=True, dir_okay=False)],
           db: DbOption = None) -> None:
    """Add the rows a dead-letter file holds unwritten back to the database: those a process let go of at a
    shutdown the database did not answer, or beyond max_unwritten while it was away. Rows the database
    refused are left out. A window the database holds as many steps of or more is skipped, so replaying a
    file twice stores nothing twice."""
    from storage.replay import read
    from storage.replay import replay as write

    store = open_store(db, migrate_schema=True)
    try:
        entries, left = read(file)
        written, skipped = write(store.db, entries, store.config.window_seconds)
    except (StoreError, OSError) as exc:
        raise fail(str(exc))
    finally:
        store.close(flush=False)
    console.print(f"{written} window rows written, {skipped} skipped (the database holds as many steps or more); "
                  f"left out: {left['refused']} refused rows, {left['unreadable']} unreadable lines", highlight=False)


def versions(db: DbOption = None,
             fmt: Annotated[Format, typer.Option("--format", help="table, json or csv.")] = Format.table) -> None:
    """Model versions seen: target and draft, first and last seen, per pod (times UTC)."""
    store = open_store(db)
    try:
        seen = store.versions()
    except StoreError as exc:
        raise fail(str(exc))
    finally:
        store.close(flush=False)
    emit_rows([dict(pod=v.pod, role=v.role, version=v.version, first_seen=iso(v.first_seen),
                    last_seen=iso(v.last_seen)) for v in seen], fmt, title="model versions seen")
