"""Dialect-neutral building blocks: upserts that replace (never add) and bucket arithmetic in SQL."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite


def _insert(conn: sa.Connection, table: sa.Table):
    return (postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert)(table)


def upsert(conn: sa.Connection, table: sa.Table, rows: Sequence[Mapping[str, Any]], keys: Sequence[str],
           set_: Mapping[str, Any] | None = None) -> None:
    """INSERT ... ON CONFLICT (keys) DO UPDATE; by default every other column takes the new value, so
    writing the same rows twice leaves the same table. ``set_`` maps column -> f(excluded) instead."""
    if not rows:
        return
    stmt = _insert(conn, table)
    if set_ is None:
        update = {c: stmt.excluded[c] for c in rows[0] if c not in keys}
    else:
        update = {c: f(stmt.excluded) for c, f in set_.items()}
    conn.execute(stmt.on_conflict_do_update(index_elements=list(keys), set_=update), list(rows))


def insert_missing(conn: sa.Connection, table: sa.Table, rows: Sequence[Mapping[str, Any]],
                   keys: Sequence[str]) -> None:
    """INSERT ... ON CONFLICT (keys) DO NOTHING."""
    if rows:
        conn.execute(_insert(conn, table).on_conflict_do_nothing(index_elements=list(keys)), list(rows))


def bucket(column: sa.ColumnElement, seconds: int) -> sa.ColumnElement:
    """Start of the ``seconds``-long bucket holding ``column`` (unix seconds, non-negative)."""
    return (column // seconds) * seconds


def floor_to(t: float, seconds: int) -> int:
    return int(t // seconds) * seconds


def ceil_to(t: float, seconds: int) -> int:
    return -int(-t // seconds) * seconds
