"""Opening a database: SQLite (embedded default, WAL) or PostgreSQL (psycopg 3), the same code on both."""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from storage.errors import StoreError


@dataclass(frozen=True)
class Timeouts:
    """Seconds a database operation may take, so a database that stops answering cannot hold a caller.

    ``connect``: opening a connection (psycopg ``connect_timeout``, the whole handshake);
    ``statement``: one statement (PostgreSQL ``statement_timeout``, and ``tcp_user_timeout`` for unacked
    data on a dead network; SQLite ``busy_timeout``, the wait for the write lock);
    ``pool``: waiting for a pooled connection when all are in use (SQLAlchemy ``pool_timeout``)."""

    connect: float = 10.0
    statement: float = 30.0
    pool: float = 10.0

    def __post_init__(self) -> None:
        for name in ("connect", "statement", "pool"):
            value = getattr(self, name)
            if type(value) not in (int, float) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"timeouts.{name}: must be a positive number of seconds, got {value!r}")


class Database:
    """An engine plus the two kinds of transaction the store uses: ``read()`` and ``write()``."""

    def __init__(self, engine: sa.Engine, timeouts: Timeouts | None = None):
        self.engine = engine
        # PostgreSQL: set at the start of every transaction (SET LOCAL), never for the session, so that
        # a transaction pooler (PgBouncer in transaction mode) may hand each transaction another server.
        self._begin = f"SET LOCAL statement_timeout = {max(1, int((timeouts or Timeouts()).statement * 1000))}"
        self.dialect = engine.dialect.name
        self.in_memory = self.dialect == "sqlite" and engine.url.database in (None, "", ":memory:")

    def close_idle(self) -> None:
        """Close the pooled connections not in use (their caches go with them); the pool opens new ones as
        needed. An in-memory SQLite database lives in its one connection, so it keeps it."""
        if not self.in_memory:
            self.engine.dispose()  # checked-out connections are closed when returned, after their work

    @classmethod
    def open(cls, url: str, *, must_exist: bool = False, timeouts: Timeouts | None = None) -> "Database":
        try:
            parsed = make_url(url)
        except ArgumentError as exc:
            hint = f" (did you mean sqlite:///{Path(url).resolve()}?)" if "://" not in url else ""
            raise StoreError(f"not a database URL: {url!r}{hint}") from exc
        backend = parsed.get_backend_name()
        if backend == "postgresql" and parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        if backend == "sqlite":
            path = parsed.database
            if must_exist and path and path != ":memory:" and not Path(path).exists():
                raise StoreError(f"no database at {path} (write to it first, or run `specwatch db migrate`)")
        elif backend != "postgresql":
            raise StoreError(f"unsupported database {backend!r}: use sqlite:///FILE or postgresql://...")
        timeouts = timeouts or Timeouts()
        options: dict = {"pool_timeout": timeouts.pool}
        if backend == "postgresql":
            options.update(pool_pre_ping=True, connect_args=_pg_connect_args(parsed, timeouts))
        try:
            engine = sa.create_engine(parsed, **options)
        except (NoSuchModuleError, ImportError) as exc:
            raise StoreError(f"cannot open {backend}: {exc}") from exc
        if backend == "sqlite":
            _sqlite_setup(engine, timeouts)
        return cls(engine, timeouts)

    @contextmanager
    def read(self, scan: bool = False) -> Iterator[sa.Connection]:
        """A read. ``scan``: aggregates over many rows (stats). On PostgreSQL such a read runs without JIT
        compilation, which cost ~40 ms per statement there and never paid back on queries of 0.1-0.3 s, and
        with ``random_page_cost`` 1.1: tier rows are written in time order, so a time range read through the
        primary key is a near-sequential read, but at the default 4 the planner scanned a whole 30-day hours
        table (2.4 GB) for its last 23 hours: 0.8-1.1 s against 0.19-0.23 s (bench/fleet.py, docs/fleet.md)."""
        with database_errors(), self.engine.connect() as conn:
            if self.dialect == "postgresql":  # SET LOCAL: this read's transaction only; one round trip
                scan_settings = "; SET LOCAL jit = off; SET LOCAL random_page_cost = 1.1" if scan else ""
                conn.exec_driver_sql(self._begin + scan_settings)
            yield conn

    @contextmanager
    def write(self, exclusive: str | None = None) -> Iterator[sa.Connection]:
        """A write transaction. On SQLite it takes the write lock at BEGIN, so a transaction that reads
        first never fails to upgrade. ``exclusive`` names a job (rollup, prune) that only one writer of a
        shared PostgreSQL database may run at a time."""
        with database_errors(), self.engine.connect() as conn:
            conn.execution_options(specwatch_write=True)
            with conn.begin():
                if self.dialect == "postgresql":
                    conn.exec_driver_sql(self._begin)
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


def _pg_connect_args(url: sa.URL, timeouts: Timeouts) -> dict:
    """libpq connection parameters; values the URL sets itself win. Nothing that makes session state: no
    server-side prepared statements (``prepare_threshold``), and the statement timeout is set per
    transaction (``Database.read`` / ``write``), not in the startup ``options``, which PgBouncer refuses."""
    ms = max(1, int(timeouts.statement * 1000))
    args: dict = {"connect_timeout": max(1, math.ceil(timeouts.connect)), "tcp_user_timeout": ms,
                  "prepare_threshold": None}
    return {k: v for k, v in args.items() if k not in url.query}


def _sqlite_setup(engine: sa.Engine, timeouts: Timeouts) -> None:
    busy = f"busy_timeout={max(1, int(timeouts.statement * 1000))}"

    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_conn, _record):
        # Let SQLAlchemy emit BEGIN itself (below) instead of the sqlite3 module's legacy behaviour.
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", busy, "foreign_keys=ON"):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _begin(conn):
        immediate = conn.get_execution_options().get("specwatch_write")
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")
