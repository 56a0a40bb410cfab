"""The query side of bench/fleet.py: 30 days of a fleet's history loaded in bulk, then the stats queries,
the rollup and the retention job timed through the real ``Store``.

The history is what rollups and retention leave behind at 1000 pods x 20 domains: each (pod, domain) has
a series at its K (2..8) and a K = 0 probe series with a row in one bucket of ten. It is generated inside
PostgreSQL (INSERT ... SELECT over generate_series, one day per statement). Loaded in full: the hours (and
days, when the schema has that tier) for 30 days. Loaded as slices, because a full minute tier at this
scale is ~1e9 rows and a week of windows ~1.3e9: minutes and windows where the timed work reads them (the
hour before and the hour after the day boundary D) and 10 minutes of each at its retention cut-off, so the
retention run deletes what an hourly run would, scaled down 6x. Per-position counts are in every tier's rows
(``at_least_i``, schema 0005 on); before, as rows of ``<tier>_positions``, they were loaded for windows and
minutes only (``stats --by domain|pod`` never reads them; the rollup does).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import sqlalchemy as sa

from storage import StatsQuery, Store, StoreConfig, pack, schema
from storage.sql import ceil_to, floor_to
from storage.tiers import WEEK, Tier, tiers

DAY, HOUR = 86400, 3600

_SERIES = """
INSERT INTO series (domain, lookahead, target_version, draft_version, pod)
SELECT 'domain-' || lpad(d::text, 2, '0'), k, 't-aaa111', 'd-5e1f0a', 'pod-' || lpad(p::text, 4, '0')
FROM generate_series(0, :pods - 1) p, generate_series(0, :domains - 1) d,
     LATERAL (VALUES (2 + (d % 4) * 2), (0)) AS ks(k)
"""
# One row per series and bucket: 2 steps a second at K, acceptance varying with series and time.
_ROWS = """
INSERT INTO {table} (bucket_start, series_id, steps, drafted, accepted, emitted, expected_n, expected_sum,
                     draft_seconds, verify_seconds{columns})
SELECT b, s.id, st, st * s.lookahead, a, st + a, st * s.lookahead, st * s.lookahead * r,
       0.0012 * s.lookahead * st, 0.011 * st{values}
FROM generate_series(:lo, :hi - :len, :len) b
CROSS JOIN (SELECT id, lookahead, substr(domain, 8)::int AS d FROM series) s
CROSS JOIN LATERAL (SELECT 2 * :len AS st, 0.45 + 0.4 * ((s.id * 7 + b / :len) % 97) / 97.0 AS r) v
CROSS JOIN LATERAL (SELECT (st * s.lookahead * r)::bigint AS a) w
WHERE s.lookahead > 0 OR (b / :len + s.d) % 10 = 0
"""
_POSITIONS = """
INSERT INTO {table} (bucket_start, series_id, position, reached, accepted)
SELECT b, s.id, p, (2 * :len * power(r, p - 1))::bigint, (2 * :len * power(r, p))::bigint
FROM generate_series(:lo, :hi - :len, :len) b
CROSS JOIN (SELECT id, lookahead FROM series WHERE lookahead > 0) s
CROSS JOIN LATERAL (SELECT 0.45 + 0.4 * ((s.id * 7 + b / :len) % 97) / 97.0 AS r) v
CROSS JOIN LATERAL generate_series(1, s.lookahead) p
"""


def _at_least(inline: bool) -> dict[str, str]:
    """The per-position columns of _ROWS (schema 0005 on): position i reached st * r^(i-1), accepted st * r^i."""
    if not inline:
        return dict(columns="", values="")
    n = range(schema.POSITIONS + 1)
    return dict(columns="".join(f", at_least_{i}" for i in n),
                values="".join(f", CASE WHEN s.lookahead >= {i} AND s.lookahead > 0 THEN (st * power(r, {i}))::bigint END"
                               for i in n))


def _tables(engine: sa.Engine) -> set[str]:
    return set(sa.inspect(engine).get_table_names())


def load(engine: sa.Engine, pods: int, domains: int, days: int, d: int, say: Callable[[str], None]) -> dict:
    """Fill the tiers around the day boundary ``d``; returns rows and seconds per part."""
    tables = _tables(engine)
    has_days = "days" in tables
    separate = "window_positions" in tables  # per-position rows beside the tier (before schema 0005)
    keep = StoreConfig()
    parts = [("windows", 10, d - keep.retain_windows - 600, d - keep.retain_windows, True),  # the cut-offs
             ("minutes", 60, d - keep.retain_minutes - 600, d - keep.retain_minutes, True),
             ("windows", 10, d - 120, d, True), ("windows", 10, d + 3540, d + 3570, True),
             ("minutes", 60, d - HOUR, d + 3540, True)]
    if "ten_minutes" in tables:  # schema 0006 on: the hour before D and the ended ten minutes after it
        parts.append(("ten_minutes", 600, d - HOUR, d + 3000, True))
    parts += [("hours", HOUR, d - (day + 1) * DAY, d - day * DAY, False) for day in range(days)]
    if has_days:
        parts.append(("days", DAY, d - days * DAY, d, False))
    if "weeks" in tables:  # schema 0009 on: the weeks ended before D, as the rollup leaves them
        parts.append(("weeks", WEEK, ceil_to(d - days * DAY, WEEK), floor_to(d, WEEK), False))
    out = dict(rows={}, seconds={})
    start = time.perf_counter()
    with engine.begin() as conn:
        conn.execute(sa.text(_SERIES), dict(pods=pods, domains=domains))
    for i, (table, length, lo, hi, positions) in enumerate(parts):
        t0 = time.perf_counter()
        with engine.begin() as conn:
            # Inline counts widen every tier's rows, so every tier has them; separate rows were loaded where
            # the timed work reads them only.
            sql = _ROWS.format(table=table, **_at_least(not separate))
            n = conn.execute(sa.text(sql), dict(lo=lo, hi=hi, len=length)).rowcount
            out["rows"][table] = out["rows"].get(table, 0) + n
            if positions and separate:
                ptable = f"{table[:-1]}_positions"
                n = conn.execute(sa.text(_POSITIONS.format(table=ptable)), dict(lo=lo, hi=hi, len=length)).rowcount
                out["rows"][ptable] = out["rows"].get(ptable, 0) + n
        out["seconds"][table] = out["seconds"].get(table, 0) + time.perf_counter() - t0
        if i % 5 == 4 or i == len(parts) - 1:
            say(f"  loaded {i + 1}/{len(parts)} parts, {sum(out['rows'].values()):,} rows, "
                f"{time.perf_counter() - start:.0f} s")
    packed = "window_blocks" in tables
    if packed:
        out["packed"] = _pack_slices(engine, d, say)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        t0 = time.perf_counter()
        conn.exec_driver_sql("VACUUM ANALYZE")  # as autovacuum would have left the tables
        out["seconds"]["vacuum_analyze"] = time.perf_counter() - t0
    _state(engine, d, days, tables)
    out["load_seconds"] = time.perf_counter() - start
    out["has_days"] = has_days
    return out


def _pack_slices(engine: sa.Engine, d: int, say: Callable[[str], None]) -> dict:
    """Schema 0006 on: the slices at the retention cut-offs are packed into blocks, as the pack job leaves
    them (the hour each is in), so retention drops their day partition. Timed: the pack's cost at scale."""
    keep = StoreConfig()
    window, minute = tiers(keep)[:2]
    return {tier.name: pack_hour(engine, tier, cut - HOUR, cut, say)
            for tier, cut in ((window, d - keep.retain_windows), (minute, d - keep.retain_minutes))}


def pack_hour(engine: sa.Engine, tier: Tier, hour: int, end: int, say: Callable[[str], None]) -> dict:
    """Pack the tier's rows of ``hour`` (up to ``end``) as the pack job does, a range of series at a time;
    rows, blocks and seconds."""
    t0 = time.perf_counter()
    with engine.begin() as conn:
        rows = conn.execute(sa.select(sa.func.count()).select_from(tier.table).where(
            tier.table.c.bucket_start >= hour, tier.table.c.bucket_start < end)).scalar()
        ranges = pack.series_ranges(conn)
    blocks = 0
    for first, last in ranges:
        with engine.begin() as conn:
            blocks += pack.pack_series(conn, tier, hour, first, last)
    out = dict(rows=rows, blocks=blocks, seconds=time.perf_counter() - t0)
    say(f"  packed {rows:,} {tier.name} rows into {blocks:,} blocks in {out['seconds']:.0f} s")
    return out


def _state(engine: sa.Engine, d: int, days: int, tables: set[str]) -> None:
    """Tier bookkeeping as a running fleet leaves it at D + 59.5 min: every ended minute rolled up, the
    current minute and hour marked behind (and the current week, from 0009); with blocks, the cut-off slices
    packed."""
    keep = StoreConfig()
    has_days, packed = "days" in tables, "window_blocks" in tables
    state = [("window", d - keep.retain_windows - 600, 0, d - keep.retain_windows),
             ("minute", d - keep.retain_minutes - 600, d + 3540, d - keep.retain_minutes),
             ("hour", d - days * DAY, d, 0)]
    if packed:  # the ten-minute tier came with the blocks (0006): loaded from the hour before D
        state.append(("ten_minute", d - HOUR, d + 3000, 0))
    if has_days:
        state.append(("day", d - days * DAY, d, 0))
    if "weeks" in tables:
        state.append(("week", ceil_to(d - days * DAY, WEEK), floor_to(d, WEEK), 0))
    columns, values = ("tier, available_from, rolled_until, packed_until", ":t, :a, :r, :p") if packed else \
        ("tier, available_from, rolled_until", ":t, :a, :r")
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM tier_state"))
        conn.execute(sa.text(f"INSERT INTO tier_state ({columns}) VALUES ({values})"),
                     [dict(t=t, a=a, r=r, p=p) for t, a, r, p in state])
        conn.execute(sa.text("DELETE FROM dirty"))
        marks = [dict(t="minute", b=d + 3540), dict(t="hour", b=d)]
        if packed:
            marks.append(dict(t="ten_minute", b=d + 3000))
        if "weeks" in tables:
            marks.append(dict(t="week", b=floor_to(d, WEEK)))
        conn.execute(sa.text("INSERT INTO dirty VALUES (:t, :b, 1)"), marks)


def time_stats(url: str, now: float, query: StatsQuery, repeats: int) -> dict:
    store = Store.open(url, StoreConfig(), migrate_schema=False, clock=lambda: now)
    runs, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = store.stats(query)
        runs.append(time.perf_counter() - t0)
    store.close(flush=False)
    return dict(first_ms=runs[0] * 1000, median_ms=statistics.median(runs) * 1000, max_ms=max(runs) * 1000,
                rows=len(result.rows), tiers=result.plan.tiers_used())


def time_jobs(url: str, engine: sa.Engine, d: int) -> dict:
    """An ordinary minute's rollup (one minute rebuilt), the rollup right after the day boundary (one
    minute, one hour and one day to rebuild: the most a rollup ever does), then the retention run."""
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM dirty"))
        conn.execute(sa.text("INSERT INTO dirty VALUES ('minute', :b, 1)"), dict(b=d - 120))
    now = d - 30
    store = Store.open(url, StoreConfig(), migrate_schema=False, clock=lambda: now)
    out = {}
    t0 = time.perf_counter()
    out["rollup_one_minute"] = dict(rebuilt=store.rollup(now), seconds=time.perf_counter() - t0)
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO dirty VALUES ('minute', :b, 1)"), dict(b=d - 60))
    now = d + 30
    t0 = time.perf_counter()
    # the minute's rebuild marks the ended hour, whose rebuild marks the ended day: all in one run
    out["rollup_at_day_boundary"] = dict(rebuilt=store.rollup(now), seconds=time.perf_counter() - t0)
    t0 = time.perf_counter()
    out["prune"] = dict(deleted={k: v for k, v in store.prune(now).items() if v},
                        seconds=time.perf_counter() - t0)
    store.close(flush=False)
    return out


def run(url: str, engine: sa.Engine, pods: int, domains: int, days: int, repeats: int,
        say: Callable[[str], None]) -> dict:
    d = (int(time.time()) // DAY) * DAY
    say(f"history: {days} days x {pods} pods x {domains} domains ...")
    loaded = load(engine, pods, domains, days, d, say)
    queries = time_queries(url, d, days, repeats, say)
    say("  rollup and retention ...")
    jobs = time_jobs(url, engine, d)
    return dict(day_boundary=d, query_now=d + NOW, load=loaded, queries=queries, jobs=jobs)


def rerun(url: str, engine: sa.Engine, days: int, repeats: int, say: Callable[[str], None]) -> dict:
    """The queries again on a history an earlier ``run`` loaded: its tier state and marks put back as the
    load left them, then the jobs (where that run timed them, its retention had dropped the cut-off
    partitions already: nothing to drop). Then, where the schema packs ten-minute rows (0007 on), the pack of
    their ended hour before D (what the pack job does to each hour of ten-minute rows an older schema left)."""
    with engine.connect() as conn:
        d = conn.execute(sa.text("SELECT available_from FROM tier_state WHERE tier = 'hour'")).scalar() + days * DAY
    tables = _tables(engine)
    _state(engine, d, days, tables)
    out = dict(day_boundary=d, query_now=d + NOW, queries=time_queries(url, d, days, repeats, say))
    say("  rollup and retention ...")
    out["jobs"] = time_jobs(url, engine, d)
    if "ten_minute_blocks" in tables:
        out["packed"] = {"ten_minute": pack_hour(engine, tiers(StoreConfig())[2], d - HOUR, d, say)}
    return out


NOW = 3570  # 59.5 min into the day: the current hour still in minutes (the slowest edge)


def time_queries(url: str, d: int, days: int, repeats: int, say: Callable[[str], None]) -> dict:
    now = d + NOW
    queries = {}
    for name, by in ((f"stats --since {days}d (fleet, by domain)", ("domain",)),
                     (f"stats --since {days}d --by pod", ("pod",))):
        say(f"  {name} ...")
        queries[name] = time_stats(url, now, StatsQuery(since=now - days * DAY, by=by), repeats)
    return queries
