"""Rollups: recompute whole buckets of the tier above from the tier below (replace, so idempotent).

Every write to a tier marks the bucket of the tier above that holds it as dirty; a rollup recomputes the
dirty buckets that have ended, marks their buckets one tier up, and clears the marks nobody touched while
it ran. So late data and data from other pods are rolled up whenever they arrive.
"""

from __future__ import annotations

import logging

import sqlalchemy as sa

from storage import schema
from storage.sql import bucket, floor_to
from storage.state import TierState, load_state, save_state
from storage.tierread import plus, rows_in
from storage.tiers import Tier
from storage.writer import mark_dirty

log = logging.getLogger(__name__)
VALUE_COLUMNS = schema.VALUE_COLUMNS  # SUM of NULLs: NULL


def rollup(conn: sa.Connection, chain: tuple[Tier, ...], now: float) -> dict[str, int]:
    """Roll every tier up into the next one; return how many buckets of each upper tier were rebuilt."""
    state = load_state(conn, chain)
    done = {}
    for i, (lower, upper) in enumerate(zip(chain, chain[1:])):
        above = chain[i + 2] if i + 2 < len(chain) else None
        done[upper.name] = _rollup_pair(conn, lower, upper, above, state, now)
    save_state(conn, state, ["rolled_until"])
    return done


def _rollup_pair(conn, lower: Tier, upper: Tier, above: Tier | None, state: dict[str, TierState],
                 now: float) -> int:
    horizon = floor_to(now, upper.seconds)
    d = schema.dirty.c
    marks = conn.execute(sa.select(d.bucket_start, d.shard, d.changes).where(
        d.tier == upper.name, d.bucket_start < horizon).order_by(d.bucket_start)).all()
    available = state[lower.name].available_from
    starts = sorted({m.bucket_start for m in marks})  # a bucket may carry marks of several shards
    gone = [s for s in starts if s < available]
    if gone:
        # The rows below were pruned: these buckets cannot be rebuilt, and keep what they have.
        log.warning("%d %s buckets changed after the %s rows below them were pruned; left as they are",
                    len(gone), upper.name, lower.name)
    todo = [s for s in starts if s >= available]
    packed = state[lower.name].packed_until if lower.blocks is not None else 0
    for lo, hi in _runs(todo, upper.seconds):
        if lo < packed:  # late rows for hours already packed: blocks and rows, summed here
            _rebuild_packed(conn, lower, upper.table, lo, min(hi, packed), upper.seconds)
            lo = min(hi, packed)
        if lo < hi:
            _rebuild(conn, lower.table, upper.table, lo, hi, upper.seconds, VALUE_COLUMNS)
    if above is not None and todo:
        mark_dirty(conn, above.name, {floor_to(s, above.seconds) for s in todo})
    if marks:
        # Cleared only if unchanged since read: a concurrent write bumps `changes` and keeps its mark.
        conn.execute(sa.delete(schema.dirty).where(
            d.tier == upper.name, d.bucket_start == sa.bindparam("b"), d.shard == sa.bindparam("s"),
            d.changes == sa.bindparam("c")),
            [dict(b=m.bucket_start, s=m.shard, c=m.changes) for m in marks])
    state[upper.name].rolled_until = max(state[upper.name].rolled_until, horizon)
    return len(todo)


def _runs(starts: list[int], seconds: int) -> list[tuple[int, int]]:
    """Sorted bucket starts -> maximal [lo, hi) runs of consecutive buckets."""
    runs: list[list[int]] = []
    for s in starts:
        if runs and runs[-1][1] == s:
            runs[-1][1] = s + seconds
        else:
            runs.append([s, s + seconds])
    return [(lo, hi) for lo, hi in runs]


def _rebuild(conn, src: sa.Table, dst: sa.Table, lo: int, hi: int, seconds: int,
             summed: tuple[str, ...]) -> None:
    """Replace dst's rows in [lo, hi) with sums of src's rows, bucketed by ``seconds``."""
    conn.execute(sa.delete(dst).where(dst.c.bucket_start >= lo, dst.c.bucket_start < hi))
    keys = (bucket(src.c.bucket_start, seconds), src.c.series_id)
    select = (sa.select(*keys, *(sa.func.sum(src.c[c]) for c in summed))
              .where(src.c.bucket_start >= lo, src.c.bucket_start < hi).group_by(*keys))
    conn.execute(sa.insert(dst).from_select(["bucket_start", "series_id", *summed], select))


def _rebuild_packed(conn, lower: Tier, dst: sa.Table, lo: int, hi: int, seconds: int) -> None:
    """``_rebuild`` where the tier below is packed: the sums taken in Python from blocks and rows."""
    conn.execute(sa.delete(dst).where(dst.c.bucket_start >= lo, dst.c.bucket_start < hi))
    sums: dict[tuple[int, int], list] = {}
    for start, series_id, values in rows_in(conn, lower, lo, hi):
        key = (floor_to(start, seconds), series_id)
        held = sums.get(key)
        sums[key] = list(values) if held is None else [plus(a, b) for a, b in zip(held, values)]
    rows = [dict(bucket_start=b, series_id=s, **dict(zip(VALUE_COLUMNS, v))) for (b, s), v in sorted(sums.items())]
    if rows:
        conn.execute(sa.insert(dst), rows)
