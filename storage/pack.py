"""Packing: the ended, rolled-up hours of a fine tier (windows, minutes) move from the tier's table into
blocks (storage/blocks.py), one per series and hour.

An hour is due once it ended more than ``late`` seconds ago (no live writer touches it any more), its
buckets of the tier above are rolled up (``rolled_until``) and no bucket in it is marked dirty. Hours are
packed oldest first; ``packed_until`` moves past an hour before its rows move, so a reader below it reads
blocks and rows together (storage/tierread.py) while the hour is half packed, and a pack that dies half way
leaves rows that the next one packs (as it packs late rows for hours packed already: merged into the
block, the row winning). Each range of series is its own transaction, under the "pack" lock, and a range
with no rows costs one index probe, so two processes packing at once only wait for each other.
"""

from __future__ import annotations

import logging

import sqlalchemy as sa

from storage import blocks, partitions, schema
from storage.engine import Database
from storage.sql import floor_to, insert_missing, upsert
from storage.state import load_state, save_state
from storage.tiers import Tier
from storage.tierread import SERIES_PER_READ, merged_rows

log = logging.getLogger(__name__)
HOUR = schema.BLOCK_SECONDS


def pack_due(db: Database, chain: tuple[Tier, ...], now: float, late: int, max_hours: int) -> dict[str, int]:
    """Pack up to ``max_hours`` due hours of every fine tier; return blocks written per tier."""
    written = {}
    for tier in chain:
        if tier.blocks is None:
            continue
        with db.write(exclusive="pack") as conn:
            hours = due(conn, chain, tier, now, late)[:max_hours]
        written[tier.name] = 0
        for hour in hours:
            with db.write(exclusive="pack") as conn:
                claim(conn, chain, tier, hour)
                ranges = series_ranges(conn)
            for first, end in ranges:
                with db.write(exclusive="pack") as conn:
                    written[tier.name] += pack_series(conn, tier, hour, first, end)
    return written


def due(conn: sa.Connection, chain: tuple[Tier, ...], tier: Tier, now: float, late: int) -> list[int]:
    """Starts of the hours of ``tier`` to pack now, oldest first."""
    upper = chain[chain.index(tier) + 1]
    state = load_state(conn, chain)
    limit = min(floor_to(now - late, HOUR), floor_to(state[upper.name].rolled_until, HOUR))
    d, t = schema.dirty.c, tier.table.c
    coarse = [x.name for x in chain if tier.seconds < x.seconds <= HOUR]
    dirty = {floor_to(b, HOUR) for b in conn.execute(
        sa.select(d.bucket_start).where(d.tier.in_(coarse), d.bucket_start < limit)).scalars()}
    hours, at = [], 0
    while True:
        first = conn.execute(sa.select(sa.func.min(t.bucket_start)).where(
            t.bucket_start >= at, t.bucket_start < limit)).scalar()
        if first is None:
            return hours
        hour = floor_to(first, HOUR)
        if hour in dirty:
            if hour >= state[tier.name].packed_until:
                return hours  # packed in order: the watermark cannot pass an hour still changing
        else:
            hours.append(hour)
        at = hour + HOUR


def claim(conn: sa.Connection, chain: tuple[Tier, ...], tier: Tier, hour: int) -> None:
    """Move the tier's ``packed_until`` past ``hour`` (before its rows move: see the module docstring)."""
    state = load_state(conn, chain)
    if state[tier.name].packed_until < hour + HOUR:
        state[tier.name].packed_until = hour + HOUR
        save_state(conn, {tier.name: state[tier.name]}, ["packed_until"])


def pack_series(conn: sa.Connection, tier: Tier, hour: int, first: int, end: int) -> int:
    """Pack the rows of ``hour`` of series ids first..end-1 into their blocks; return blocks written."""
    t = tier.table.c
    in_hour = (t.series_id >= first, t.series_id < end, t.bucket_start >= hour, t.bucket_start < hour + HOUR)
    if conn.execute(sa.select(t.series_id).where(*in_hour).limit(1)).first() is None:
        return 0
    touched = set(conn.execute(sa.select(t.series_id).where(*in_hour).distinct()).scalars())
    by_series: dict[int, dict[int, tuple]] = {}
    for (start, series_id), values in merged_rows(conn, tier, hour, hour + HOUR, (first, end)).items():
        if series_id in touched:  # the others' blocks stay as they are
            by_series.setdefault(series_id, {})[(start - hour) // tier.seconds] = values
    packed = []
    for series_id, buckets in sorted(by_series.items()):
        try:
            packed.append(dict(block_start=hour, series_id=series_id, data=blocks.encode(buckets, tier.seconds)))
        except ValueError as exc:  # its rows stay where they are, read as late rows are
            log.warning("series %d, hour %d of %s left unpacked: %s", series_id, hour, tier.table.name, exc)
    if not packed:
        return 0
    partitions.ensure(conn, tier.blocks, {hour})
    upsert(conn, tier.blocks, packed, ["block_start", "series_id"])
    conn.execute(sa.delete(tier.table).where(t.series_id.in_([b["series_id"] for b in packed]),
                                             t.bucket_start >= hour, t.bucket_start < hour + HOUR))
    return len(packed)


def series_ranges(conn: sa.Connection) -> list[tuple[int, int]]:
    top = conn.execute(sa.select(sa.func.max(schema.series.c.id))).scalar() or 0
    return [(first, first + SERIES_PER_READ) for first in range(0, top + 1, SERIES_PER_READ)]


def unpack_all(conn: sa.Connection, rows_table: str, blocks_table: str) -> int:
    """Decode every block of ``blocks_table`` back into rows of ``rows_table`` (a migration's downgrade; the
    tables by name, as that revision has them); return rows added. Rows still in the tier (late ones, or
    hours not packed yet) win over a block's bucket, as they do for a reader."""
    rows = sa.Table(rows_table, sa.MetaData(), autoload_with=conn)
    stored = sa.table(blocks_table, sa.column("block_start"), sa.column("series_id"), sa.column("data"))
    added, batch = 0, []
    for block_start, series_id, data in conn.execute(sa.select(stored.c.block_start, stored.c.series_id,
                                                               stored.c.data)).all():
        seconds, buckets = blocks.decode(data)
        batch += [dict(bucket_start=block_start + i * seconds, series_id=series_id,
                       **dict(zip(blocks.VALUE_COLUMNS, values))) for i, values in buckets.items()]
        if len(batch) >= UNPACK_BATCH:  # one statement per block had taken a minute per hour of 1000 pods
            insert_missing(conn, rows, batch, ["bucket_start", "series_id"])
            added, batch = added + len(batch), []
    insert_missing(conn, rows, batch, ["bucket_start", "series_id"])
    return added + len(batch)


UNPACK_BATCH = 5000
