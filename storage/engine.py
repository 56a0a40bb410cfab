"""Opening a database: SQLite (embedded default, WAL) or PostgreSQL (psycopg 3), the same code on both."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from storage.errors import StoreError


class Database:
    """An engine plus the two kinds of transaction the store uses: ``read()`` and ``write()``."""

    def __init__(self, engine: sa.Engine):
        self.engine = engine
        self.dialect = engine.dialect.name

    @classmethod
    def open(cls, url: str, *, must_exist: bool = False) -> "Database":
        try:
            parsed = make_url(url)
        except ArgumentError as exc:
            raise StoreError(f"not a database URL: {url!r}") from exc
        backend = parsed.get_backend_name()
        if backend == "postgresql" and parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        if backend == "sqlite":
            path = parsed.database
            if must_exist and path and path != ":memory:" and not Path(path).exists():
                raise StoreError(f"no database at {path} (write to it first, or run `specwatch db migrate`)")
        elif backend != "postgresql":
            raise StoreError(f"unsupported database {backend!r}: use sqlite:///FILE or postgresql://...")
        try:
            engine = sa.create_engine(parsed, pool_pre_ping=backend == "postgresql")
        except (NoSuchModuleError, ImportError) as exc:
            raise StoreError(f"cannot open {backend}: {exc}") from exc
        if backend == "sqlite":
            _sqlite_setup(engine)
        return cls(engine)

    @contextmanager
    def read(self) -> Iterator[sa.Connection]:
        with database_errors(), self.engine.connect() as conn:
            yield conn

    @contextmanager
    def write(self, exclusive: str | None = None) -> Iterator[sa.Connection]:
        """A write transaction. On SQLite it takes the write lock at BEGIN, so a transaction that reads
        first never fails to upgrade. ``exclusive`` names a job (rollup, prune) that only one writer of a
        shared PostgreSQL database may run at a time."""
        with database_errors(), self.engine.connect() as conn:
            conn.execution_options(specwatch_write=True)
            with conn.begin():
                if exclusive and self.dialect == "postgresql":
                    conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"),
                                 {"k": zlib.crc32(f"specwatch:{exclusive}".encode())})
                yield conn

    def reclaim(self, tables: list[str]) -> None:
        """Make the space of deleted rows reusable now. PostgreSQL needs VACUUM for that (autovacuum may
        be off or late); SQLite reuses freed pages by itself."""
        if self.dialect != "postgresql" or not tables:
            return
        with database_errors(), self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            for table in tables:
                conn.exec_driver_sql(f'VACUUM (ANALYZE) "{table}"')

    def size_bytes(self) -> int:
        """Bytes the database occupies (the file and its WAL; the current PostgreSQL database)."""
        if self.dialect == "sqlite":
            path = Path(self.engine.url.database or "")
            return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.is_file())
        with self.read() as conn:
            return int(conn.execute(sa.text(
                "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'm')")).scalar())

    def dispose(self) -> None:
        self.engine.dispose()


@contextmanager
def database_errors() -> Iterator[None]:
    """Turn a driver error (unreachable server, locked file, ...) into a one-line StoreError."""
    try:
        yield
    except sa.exc.SQLAlchemyError as exc:
        cause = getattr(exc, "orig", None) or exc
        lines = str(cause).strip().splitlines()
        raise StoreError(f"database error: {lines[0] if lines else type(cause).__name__}") from exc


def _sqlite_setup(engine: sa.Engine) -> None:
    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_conn, _record):
        # Let SQLAlchemy emit BEGIN itself (below) instead of the sqlite3 module's legacy behaviour.
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "busy_timeout=10000", "foreign_keys=ON"):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _begin(conn):
        immediate = conn.get_execution_options().get("specwatch_write")
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")
