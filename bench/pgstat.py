"""What the PostgreSQL server spent: CPU seconds of its processes (from /proc) and table sizes."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import sqlalchemy as sa

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # fields from "state" on (the name may hold spaces)


def postmaster_pid(engine: sa.Engine) -> int | None:
    """The server's main process: the parent of this connection's backend (None if not on this machine)."""
    with engine.connect() as conn:
        backend = conn.execute(sa.text("SELECT pg_backend_pid()")).scalar()
    fields = _stat(backend)
    return int(fields[1]) if fields else None


def cpu_seconds(postmaster: int | None) -> float:
    """User + system CPU of the server: its live processes plus the children it has reaped."""
    if postmaster is None:
        return float("nan")
    total = 0
    main = _stat(postmaster)
    if main:
        total += sum(int(x) for x in main[11:15])  # utime, stime, cutime, cstime
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields and int(fields[1]) == postmaster:
                total += int(fields[11]) + int(fields[12])
    return total / TICK


def table_sizes(engine: sa.Engine) -> dict[str, int]:
    """pg_total_relation_size (heap, indexes, TOAST) of every table in the current schema, partitions
    counted in their parent."""
    with engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT COALESCE(p.relname, c.relname) AS name, SUM(pg_total_relation_size(c.oid)) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "LEFT JOIN pg_inherits i ON i.inhrelid = c.oid LEFT JOIN pg_class p ON p.oid = i.inhparent "
            "WHERE n.nspname = current_schema() AND c.relkind = 'r' GROUP BY 1")).all()
    return {name: int(size) for name, size in rows}


def row_counts(engine: sa.Engine, tables: list[str]) -> dict[str, int]:
    with engine.connect() as conn:
        return {t: int(conn.execute(sa.text(f'SELECT count(*) FROM "{t}"')).scalar()) for t in tables}


def vacuum_full(engine: sa.Engine, tables: list[str]) -> None:
    """Rewrite ``tables`` without their dead row versions, so their size is that of the live rows."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for t in tables:
            conn.exec_driver_sql(f'VACUUM FULL "{t}"')


class ConnectionSampler:
    """The most server connections (``pg_stat_activity``) to ``database`` seen while the block runs, sampled
    every ``every`` seconds on a thread (``database`` None: nothing sampled, ``most`` stays None)."""

    def __init__(self, admin: sa.Engine, database: str | None, every: float = 0.25):
        self.admin, self.database, self.every = admin, database, every
        self.most: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with self.admin.connect() as conn:
            while not self._stop.wait(self.every):
                n = int(conn.execute(sa.text("SELECT count(*) FROM pg_stat_activity WHERE datname = :d"),
                                     {"d": self.database}).scalar())
                self.most = max(self.most or 0, n)

    def __enter__(self) -> "ConnectionSampler":
        if self.database is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
