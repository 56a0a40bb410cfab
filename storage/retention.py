"""Retention: remove rows older than their tier's retention, but only rows the tier above covers.

A fine tier's blocks go a whole hour at a time; on PostgreSQL a whole day at a time, by dropping its
partition (storage/partitions.py): no row is deleted there, so the run takes as long at a thousand pods as
at one. The tier's own table holds only the hours not yet packed, and is deleted from as before."""

from __future__ import annotations

import sqlalchemy as sa

from storage import partitions, schema
from storage.sql import bucket, floor_to
from storage.state import load_state, save_state
from storage.tiers import Tier


def prune(conn: sa.Connection, chain: tuple[Tier, ...], now: float, events_retain: int) -> dict[str, int]:
    """Delete expired rows of every tier, and events older than ``events_retain`` (model versions are
    kept: they are few and tell the history of the pod). Return rows deleted per table."""
    state = load_state(conn, chain)
    deleted = {}
    d = schema.dirty.c
    for lower, upper in zip(chain, (*chain[1:], None)):
        cutoff = floor_to(now - lower.retain, upper.seconds if upper else lower.seconds)
        covered = None
        if upper is not None:
            # Covered: below the rollup watermark, and nothing in or below the tier above changed since
            # (no dirty mark up to it). Marks are few: only buckets written since the last rollup.
            finer = [t.name for t in chain if t.seconds <= upper.seconds]
            first_dirty = conn.execute(sa.select(sa.func.min(d.bucket_start)).where(d.tier.in_(finer))).scalar()
            cutoff = min(cutoff, state[upper.name].rolled_until,
                         cutoff if first_dirty is None else floor_to(first_dirty, upper.seconds))
            covered = lambda t, up=upper: ~sa.exists().where(  # noqa: E731
                d.tier == up.name, d.bucket_start == bucket(t.c.bucket_start, up.seconds))
        if cutoff <= state[lower.name].available_from:
            continue
        table = lower.table
        where = [table.c.bucket_start < cutoff]
        if covered is not None:
            where.append(covered(table))
        deleted[table.name] = conn.execute(sa.delete(table).where(*where)).rowcount
        if lower.blocks is not None:
            deleted.update(_drop_blocks(conn, lower.blocks, cutoff))
        state[lower.name].available_from = cutoff
    save_state(conn, state, ["available_from"])
    horizon = now - events_retain
    for table, column in ((schema.transitions, "ts"), (schema.decisions, "ts"),
                          (schema.alerts, "ends_at")):
        deleted[table.name] = conn.execute(sa.delete(table).where(table.c[column] < horizon)).rowcount
    return deleted


def _drop_blocks(conn: sa.Connection, blocks: sa.Table, cutoff: int) -> dict[str, int]:
    """Blocks wholly before ``cutoff``: {table: blocks deleted} (SQLite), {table_days: days dropped} (PG)."""
    if conn.dialect.name == "postgresql":
        # A drop waits for the readers of the table to finish; rather than stall the writers queued
        # behind it, give up and drop at the next run.
        conn.exec_driver_sql("SET LOCAL lock_timeout = '2s'")
        return {f"{blocks.name}_days": partitions.drop_before(conn, blocks, cutoff)}
    b = blocks.c
    return {blocks.name: conn.execute(sa.delete(blocks).where(
        b.block_start <= cutoff - schema.BLOCK_SECONDS)).rowcount}
