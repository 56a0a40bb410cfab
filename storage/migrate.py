"""Schema versions: Alembic migrations, and the check at start-up that refuses an unknown newer schema."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError

from storage.engine import Database
from storage.errors import SchemaError

MIGRATIONS = Path(__file__).parent / "migrations"


def _config(db: Database | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if db is not None:
        config.attributes["engine"] = db.engine
    return config


def head_revision() -> str:
    return ScriptDirectory.from_config(_config()).get_current_head()


def current_revision(db: Database) -> str | None:
    """The database's schema revision, or None when it has no specwatch schema."""
    with db.read() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def check(db: Database, *, allow_older: bool = False) -> str | None:
    """Raise SchemaError unless the schema is one this code can use; return its revision."""
    current, head = current_revision(db), head_revision()
    if current == head:
        return current
    scripts = ScriptDirectory.from_config(_config())
    try:
        known = current is None or scripts.get_revision(current) is not None
    except CommandError:
        known = False
    if not known:
        raise SchemaError(
            f"database schema is at revision {current}, which this specwatch does not know (its newest is "
            f"{head}); it was written by a newer specwatch: upgrade specwatch, or use another database")
    if not allow_older:
        what = "has no specwatch schema" if current is None else f"schema is at revision {current}"
        raise SchemaError(f"database {what}, this specwatch needs {head}: run `specwatch db migrate`")
    return current


def upgrade(db: Database, revision: str = "head") -> tuple[str | None, str]:
    """Migrate the schema up to ``revision``; return (before, after). Refuses an unknown newer schema."""
    before = check(db, allow_older=True)
    command.upgrade(_config(db), revision)
    return before, current_revision(db)


def downgrade(db: Database, revision: str) -> None:
    command.downgrade(_config(db), revision)
