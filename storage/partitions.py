"""Day partitions of the block tables on PostgreSQL: created as packing needs them, dropped by retention.

A partition is named after its table and the unix second its day starts (``window_blocks_p1795737600``),
so finding the droppable ones needs no parsing of partition bounds. SQLite has no partitions: there,
retention deletes (storage/retention.py) and ``ensure`` does nothing.
"""

from __future__ import annotations

import re

import sqlalchemy as sa

from storage.sql import floor_to

DAY = 86400


def name_of(table: sa.Table, day_start: int) -> str:
    return f"{table.name}_p{day_start}"


def ensure(conn: sa.Connection, table: sa.Table, starts: set[int]) -> None:
    """Make sure the partitions holding ``starts`` (unix seconds) exist."""
    if conn.dialect.name != "postgresql":
        return
    have = {lo for _, lo in partitions(conn, table)}
    for day in sorted({floor_to(s, DAY) for s in starts} - have):
        conn.exec_driver_sql(f'CREATE TABLE IF NOT EXISTS "{name_of(table, day)}" PARTITION OF "{table.name}" '
                             f"FOR VALUES FROM ({day}) TO ({day + DAY})")


def partitions(conn: sa.Connection, table: sa.Table) -> list[tuple[str, int]]:
    """(name, day start) of the table's partitions, oldest first (PostgreSQL)."""
    rows = conn.execute(sa.text(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = CAST(:t AS regclass)"), {"t": table.name}).scalars()
    pattern = re.compile(rf"{re.escape(table.name)}_p(\d+)")
    found = [(name, int(m.group(1))) for name in rows if (m := pattern.fullmatch(name))]
    return sorted(found, key=lambda x: x[1])


def drop_before(conn: sa.Connection, table: sa.Table, cutoff: int) -> int:
    """Drop every partition whose whole day lies before ``cutoff``; return how many."""
    dropped = 0
    for name, day in partitions(conn, table):
        if day + DAY <= cutoff:
            conn.exec_driver_sql(f'DROP TABLE "{name}"')
            dropped += 1
    return dropped
