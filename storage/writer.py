"""Writing closed windows: one transaction, many rows, totals replaced so a re-flush never double counts."""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence

import sqlalchemy as sa

from storage import schema
from storage.cache import LRU
from storage.counts import SeriesKey, WindowCounts, at_least
from storage.sql import floor_to, insert_missing, upsert

WindowEntry = tuple[int, SeriesKey, WindowCounts]
Known = Mapping[SeriesKey, int] | LRU[SeriesKey, int]  # anything with .get
SERIES_COLUMNS = ("pod", "domain", "target_version", "draft_version", "lookahead")


def resolve_series(conn: sa.Connection, keys: set[SeriesKey], known: Known) -> dict[SeriesKey, int]:
    """Ids of ``keys``, creating missing series. ``known`` is a cache the caller updates after commit."""
    ids = {k: i for k, i in ((k, known.get(k)) for k in keys) if i is not None}
    missing = sorted(keys - ids.keys())
    if missing:
        insert_missing(conn, schema.series, [dict(zip(SERIES_COLUMNS, k)) for k in missing],
                       ["domain", "lookahead", "target_version", "draft_version", "pod"])
        s = schema.series.c
        columns = [s[c] for c in SERIES_COLUMNS]
        for chunk in range(0, len(missing), 150):  # 750 parameters: under every SQLite limit
            part = missing[chunk:chunk + 150]
            for row in conn.execute(sa.select(*columns, s.id).where(sa.tuple_(*columns).in_(part))):
                ids[tuple(row[:5])] = row.id
    return ids


def write_windows(conn: sa.Connection, entries: Sequence[WindowEntry], window_seconds: int,
                  known: Known) -> dict[SeriesKey, int]:
    """Upsert window rows (per-position counts in the row), the dirty marks of their minutes and the model
    versions they show. Returns the series ids used (for the caller's cache)."""
    ids = resolve_series(conn, {key for _, key, _ in entries}, known)
    rows, minutes, seen = [], set(), {}
    for start, key, c in entries:
        counts = at_least(c.hist) if c.lookahead else []
        rows.append(dict(bucket_start=start, series_id=ids[key], steps=c.steps, drafted=c.drafted,
                         accepted=c.accepted, emitted=c.emitted, expected_n=c.expected_n,
                         expected_sum=c.expected_sum, draft_seconds=c.draft_seconds,
                         verify_seconds=c.verify_seconds,
                         **{name: counts[i] if i < len(counts) else None
                            for i, name in enumerate(schema.AT_LEAST)}))
        minutes.add(floor_to(start, 60))
        pod, _, target, draft, _ = key
        for role, version in (("target", target), ("draft", draft)):
            first, last = seen.get((pod, role, version), (start, start))
            seen[(pod, role, version)] = (min(first, start), max(last, start + window_seconds))
    upsert(conn, schema.windows, rows, ["bucket_start", "series_id"])
    note_versions(conn, [dict(pod=p, role=r, version=v, first_seen=float(f), last_seen=float(last))
                         for (p, r, v), (f, last) in seen.items()])
    # Last: the mark's row stays locked until commit, and other pods of the same shard wait for it.
    mark_dirty(conn, "minute", minutes, shard_of(entries[0][1][0]) if entries else 0)
    return ids


def shard_of(pod: str) -> int:
    """The dirty-mark shard of a pod's writes (stable across processes: not Python's salted hash)."""
    return zlib.crc32(pod.encode()) % schema.DIRTY_SHARDS


def mark_dirty(conn: sa.Connection, tier: str, starts: set[int], shard: int = 0) -> None:
    """Mark buckets of ``tier`` as behind the tier below (to be recomputed by the next rollup)."""
    upsert(conn, schema.dirty, [dict(tier=tier, bucket_start=s, shard=shard, changes=1) for s in sorted(starts)],
           ["tier", "bucket_start", "shard"], set_={"changes": lambda _: schema.dirty.c.changes + 1})


def note_versions(conn: sa.Connection, rows: list[dict]) -> None:
    """Widen each (pod, role, version)'s first/last seen to include the given times."""
    t = schema.model_versions.c
    upsert(conn, schema.model_versions, rows, ["pod", "role", "version"], set_={
        "first_seen": lambda x: sa.case((x.first_seen < t.first_seen, x.first_seen), else_=t.first_seen),
        "last_seen": lambda x: sa.case((x.last_seen > t.last_seen, x.last_seen), else_=t.last_seen),
    })
