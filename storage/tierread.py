"""Reading a fine tier where its hours are packed: the blocks' buckets, with the tier's own rows (late
writes after the pack) winning over a block's bucket of the same series. Python, not SQL: a block is
opaque to the database. Rollups and queries use it only below the tier's ``packed_until``; above it the
tier's table is all there is and SQL sums it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import sqlalchemy as sa

from storage import blocks, schema
from storage.sql import floor_to
from storage.tiers import Tier

Values = tuple[int | float | None, ...]  # blocks.VALUE_COLUMNS order


def merged_rows(conn: sa.Connection, tier: Tier, lo: int, hi: int,
                series: tuple[int, int] | None = None) -> dict[tuple[int, int], Values]:
    """{(bucket start, series id): values} of the tier's buckets in [lo, hi); ``series`` = (first, end):
    only series ids in that range."""
    out: dict[tuple[int, int], Values] = {}
    if tier.blocks is not None:
        for block_start, series_id, data in conn.execute(_blocks_in(tier.blocks, lo, hi, series)):
            seconds, buckets = blocks.decode(data)
            for index, values in buckets.items():
                start = block_start + index * seconds
                if lo <= start < hi:
                    out[(start, series_id)] = values
    for row in conn.execute(_rows_in(tier.table, lo, hi, series)):
        out[(row[0], row[1])] = tuple(row[2:])
    return out


def rows_in(conn: sa.Connection, tier: Tier, lo: int, hi: int) -> Iterator[tuple[int, int, Values]]:
    """(bucket start, series id, values) of [lo, hi), a range of series at a time (bounded memory)."""
    s = schema.series.c
    top = conn.execute(sa.select(sa.func.max(s.id))).scalar() or 0
    for first in range(0, top + 1, SERIES_PER_READ):
        for (start, series_id), values in merged_rows(conn, tier, lo, hi, (first, first + SERIES_PER_READ)).items():
            yield start, series_id, values


SERIES_PER_READ = 2000


def _blocks_in(table: sa.Table, lo: int, hi: int, series: tuple[int, int] | None) -> sa.Select:
    b = table.c
    stmt = sa.select(b.block_start, b.series_id, b.data).where(
        b.block_start >= floor_to(lo, schema.BLOCK_SECONDS), b.block_start < hi)
    if series is not None:
        stmt = stmt.where(b.series_id >= series[0], b.series_id < series[1])
    return stmt


def _rows_in(table: sa.Table, lo: int, hi: int, series: tuple[int, int] | None) -> sa.Select:
    t = table.c
    stmt = sa.select(t.bucket_start, t.series_id, *(t[c] for c in blocks.VALUE_COLUMNS)).where(
        t.bucket_start >= lo, t.bucket_start < hi)
    if series is not None:
        stmt = stmt.where(t.series_id >= series[0], t.series_id < series[1])
    return stmt


def grouped(conn: sa.Connection, tier: Tier, lo: int, hi: int, key_of: Callable[[sa.Row, int], tuple],
            columns: Sequence[str], domain: str | None = None) -> list[tuple]:
    """Rows (key..., sums of ``columns``...) of [lo, hi) as a GROUP BY over the tier joined with its series
    would give them: ``key_of(series row, bucket start)`` is the group; ``domain`` keeps that domain only."""
    s = schema.series.c
    stmt = sa.select(s.id, s.domain, s.lookahead, s.target_version, s.draft_version, s.pod)
    series = {row.id: row for row in conn.execute(stmt if domain is None else stmt.where(s.domain == domain))}
    picks = [schema.VALUE_COLUMNS.index(c) for c in columns]
    groups: dict[tuple, list] = {}
    for start, series_id, values in rows_in(conn, tier, lo, hi):
        info = series.get(series_id)
        if info is None:
            continue
        key = key_of(info, start)
        held, new = groups.get(key), [values[i] for i in picks]
        groups[key] = new if held is None else [plus(a, b) for a, b in zip(held, new)]
    return [(*key, *sums) for key, sums in groups.items()]


def plus(a, b):
    """Addition as SQL's SUM takes it: NULLs left out, NULL when all are."""
    return b if a is None else a if b is None else a + b
