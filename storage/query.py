"""``stats``: acceptance, accepted length, tokens and time per step, speed-up over K = 0, grouped."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from storage import loads, ratios, schema
from storage.errors import StoreError
from storage.planner import Plan, Segment, TierView, plan
from storage.ratios import Totals
from storage.sql import bucket, floor_to
from storage.state import load_state
from storage.tierread import grouped
from storage.tiers import Tier

TIME_DIMS = {"10s": 10, "minute": 60, "5m": 300, "hour": 3600, "day": 86400}
SERIES_DIMS = ("domain", "lookahead", "target_version", "draft_version", "pod")
DIMENSIONS = (*SERIES_DIMS, *TIME_DIMS, "position", "load")
TOTALS = tuple(Totals.__dataclass_fields__)


@dataclass(frozen=True)
class StatsQuery:
    """Rows with bucket start in [since, until) (unix seconds; None: all history / everything stored up to
    now and any rows stamped ahead of it), grouped by
    ``by``. ``tier`` forces one tier (tests, debugging) instead of the planner's choice."""

    since: float | None = None
    until: float | None = None
    by: tuple[str, ...] = ("domain",)
    domain: str | None = None
    tier: str | None = None

    def __post_init__(self) -> None:
        if not self.by:
            raise StoreError("group by at least one of " + ", ".join(DIMENSIONS))
        for d in self.by:
            if d not in DIMENSIONS:
                raise StoreError(f"cannot group by {d!r}; choose from {', '.join(DIMENSIONS)}")
        if len(set(self.by)) != len(self.by) or len(set(self.by) & TIME_DIMS.keys()) > 1:
            raise StoreError("group by each dimension once, and by at most one of minute, hour, day")
        if "load" in self.by and not set(self.by) <= {"load", *SERIES_DIMS}:
            raise StoreError("--by load combines with " + ", ".join(SERIES_DIMS) + " only (requests by load "
                             "are kept an hour at a time)")
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value)):
                raise StoreError(f"{name} must be unix seconds, got {value!r}")
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise StoreError("since must be before until")


@dataclass(frozen=True)
class StatsResult:
    by: tuple[str, ...]
    rows: list[dict[str, Any]]  # group keys (times as unix seconds) then measures (seconds, ratios 0..1)
    plan: Plan = field(repr=False)


def stats(conn: sa.Connection, query: StatsQuery, chain: tuple[Tier, ...], now: float) -> StatsResult:
    tiers = {t.name: t for t in chain}
    if query.tier is not None and query.tier not in tiers:
        raise StoreError(f"unknown tier {query.tier!r}; choose from {', '.join(tiers)}")
    if "load" in query.by:
        return _by_load(conn, query, now)
    state = load_state(conn, chain)
    until = int(math.ceil(query.until)) if query.until is not None else stored_until(conn, chain, now)
    if query.since is not None:
        since = int(math.floor(query.since))
    else:  # all history: from the oldest row still complete in some tier (or nothing at all)
        oldest = [conn.execute(sa.select(sa.func.min(t.table.c.bucket_start))).scalar() for t in chain]
        oldest += [conn.execute(sa.select(sa.func.min(t.blocks.c.block_start))).scalar() for t in chain
                   if t.blocks is not None]
        oldest = [o for o in oldest if o is not None]
        complete = 0 if query.tier is not None else min(s.available_from for s in state.values())
        since = max(complete, min(oldest)) if oldest else until
    if query.tier is not None:
        views = [TierView(query.tier, tiers[query.tier].seconds)]
    else:
        grain = next((TIME_DIMS[d] for d in query.by if d in TIME_DIMS), None)
        usable = [t for t in chain if grain is None or grain % t.seconds == 0]
        views = _views(conn, usable, state, since, until)
    the_plan = plan(since, until, views)
    positions = "position" in query.by
    groups: dict[tuple, list] = {}
    in_sql = []
    for name, lo, hi, sign in _reads(the_plan):
        tier = tiers[name]
        packed = state[tier.name].packed_until if tier.blocks is not None else 0
        if lo < packed:  # hours in blocks: summed in Python (storage/tierread.py)
            for row in _packed(conn, tier, lo, min(hi, packed), query, positions):
                _accumulate(groups, row, query.by, positions, sign)
        if max(lo, packed) < hi:
            in_sql.append(_part(tier, max(lo, packed), hi, query, sign))
    if in_sql:
        for row in conn.execute(_select(in_sql, query, positions)):
            _accumulate(groups, row, query.by, positions)
    if any(s.whole for s in the_plan.segments):  # a group only in a complement's subtracted part: none
        groups = {k: v for k, v in groups.items() if (v[0] or v[1] if positions else (v[0] + v[1]).steps)}
    rows = _position_rows(groups, query.by) if positions else _rows(groups, query.by)
    return StatsResult(query.by, rows, the_plan)


def _reads(the_plan: Plan) -> list[tuple[str, int, int, int]]:
    """The plan's reads (storage/planner.py), adjacent ones of a tier and sign as one (one scan)."""
    out: list[tuple[str, int, int, int]] = []
    for name, lo, hi, sign in sorted((r for s in the_plan.segments for r in s.reads()), key=lambda r: (r[0], r[3], r[1])):
        if out and out[-1][0] == name and out[-1][3] == sign and out[-1][2] == lo:
            out[-1] = (name, out[-1][1], hi, sign)
        else:
            out.append((name, lo, hi, sign))
    return out


def stored_until(conn: sa.Connection, chain: tuple[Tier, ...], now: float) -> int:
    """The end of "now" for a query: now, or later when rows are stamped ahead of the clock (records within
    the allowed skew, and those a restarted process counts in the first window after its start)."""
    latest = conn.execute(sa.select(sa.func.max(chain[0].table.c.bucket_start))).scalar()
    return max(int(math.ceil(now)), 0 if latest is None else int(latest) + chain[0].seconds)


def last_window_of(conn: sa.Connection, pod: str, since: int) -> int | None:
    """The start of the latest window ``pod`` stored at or after ``since`` (None if none)."""
    w, s = schema.windows.c, schema.series.c
    last = conn.execute(sa.select(sa.func.max(w.bucket_start)).where(
        w.bucket_start >= since, w.series_id.in_(sa.select(s.id).where(s.pod == pod)))).scalar()
    return None if last is None else int(last)


def _views(conn, usable: list[Tier], state, since: int, until: int) -> list[TierView]:
    d = schema.dirty.c
    marks: dict[str, set[int]] = {}
    # From the start of the coarsest bucket holding `since`: a complement reads all of that bucket.
    for tier, start in conn.execute(sa.select(d.tier, d.bucket_start).where(
            d.bucket_start >= since - max(t.seconds for t in usable), d.bucket_start < until)):
        marks.setdefault(tier, set()).add(start)
    # A bucket is behind when it or any finer bucket inside it was written since the last rollup.
    views = []
    for t in usable:
        behind = {floor_to(m, t.seconds) for s in usable if s.seconds <= t.seconds
                  for m in marks.get(s.name, ())}
        views.append(TierView(t.name, t.seconds, state[t.name].available_from, frozenset(behind),
                              state[t.name].rolled_until))
    return views


def _part(tier: Tier, lo: int, hi: int, query: StatsQuery, sign: int) -> sa.Select:
    """The rows of [lo, hi) of a tier's table: series id, the time bucket grouped by (if any), the values
    (negated for a complement's subtracted part)."""
    src = tier.table.c
    grain = next((TIME_DIMS[d] for d in query.by if d in TIME_DIMS), None)
    when = [bucket(src.bucket_start, grain).label("t")] if grain else []
    values = [(src[c] if sign > 0 else -src[c]).label(c) for c in _measured(query)]
    return sa.select(src.series_id, *when, *values).where(src.bucket_start >= lo, src.bucket_start < hi)


def _measured(query: StatsQuery) -> tuple[str, ...]:
    return schema.AT_LEAST if "position" in query.by else TOTALS


def _select(parts: list[sa.Select], query: StatsQuery, positions: bool) -> sa.Select:
    """One statement for every part read in SQL: their rows together, joined with their series once,
    summed by the groups asked for."""
    rows = (parts[0] if len(parts) == 1 else sa.union_all(*parts)).subquery("parts")
    s = schema.series.c
    dims = [s[d] if d in SERIES_DIMS else rows.c.t for d in query.by if d != "position"]
    # Each row's counts cover positions 1..K of its K (group by K too); else speculative or plain.
    dims.append(s.lookahead if positions else sa.case((s.lookahead > 0, 1), else_=0))
    stmt = (sa.select(*dims, *(sa.func.sum(rows.c[c]) for c in _measured(query)))
            .select_from(rows.join(schema.series, s.id == rows.c.series_id))
            .group_by(*dims))
    if query.domain is not None:
        stmt = stmt.where(s.domain == query.domain)
    return stmt


def _packed(conn, tier: Tier, lo: int, hi: int, query: StatsQuery, positions: bool) -> list[tuple]:
    """What ``_select`` gives, from blocks and rows of [lo, hi) of a packed tier."""
    def key_of(series, start: int) -> tuple:
        dims = [getattr(series, d) if d in SERIES_DIMS else floor_to(start, TIME_DIMS[d])
                for d in query.by if d != "position"]
        return (*dims, series.lookahead if positions else int(series.lookahead > 0))
    return grouped(conn, tier, lo, hi, key_of, _measured(query), query.domain)


def _accumulate(groups: dict[tuple, list], row, by: tuple[str, ...], positions: bool, sign: int = 1) -> None:
    n_dims = len(by)
    if sign < 0:  # a complement's subtracted part, summed in Python: its measures negated
        at = n_dims if positions else n_dims + 1
        row = (*row[:at], *(None if v is None else -v for v in row[at:]))
    if positions:  # "position" is not a column: the row's K stands after the other dimensions instead
        at = by.index("position")
        key = [v if isinstance(v, str) else int(v) for v in row[:n_dims - 1]]
        k, counts = int(row[n_dims - 1]), row[n_dims:]
        for i in range(1, min(k, schema.POSITIONS) + 1):
            reached = int(counts[i - 1] or 0)
            if reached:
                pair = groups.setdefault((*key[:at], i, *key[at:]), [0, 0])
                pair[0] += reached
                pair[1] += int(counts[i] or 0)
        return
    key = tuple(v if isinstance(v, str) else int(v) for v in row[:n_dims])  # PostgreSQL sums are Decimal
    spec_flag, values = row[n_dims], row[n_dims + 1:]
    totals = Totals(*(float(v) if name in schema.SUM_COLUMNS else int(v) for name, v in zip(TOTALS, values)))
    pair = groups.setdefault(key, [Totals(), Totals()])  # speculative (K > 0), plain (K = 0)
    pair[0 if spec_flag else 1] = pair[0 if spec_flag else 1] + totals


def _rows(groups: dict[tuple, list], by: tuple[str, ...]) -> list[dict[str, Any]]:
    # Grouped by K, the K = 0 row is the baseline of every other K with the same other keys.
    k = by.index("lookahead") if "lookahead" in by else None
    baselines: dict[tuple, Totals] = {}
    for key, (_, plain) in groups.items():
        rest = key if k is None else key[:k] + key[k + 1:]
        baselines[rest] = baselines.get(rest, Totals()) + plain
    rows = []
    for key in sorted(groups):
        spec, plain = groups[key]
        both = spec + plain
        baseline = baselines[key if k is None else key[:k] + key[k + 1:]]
        rows.append({**dict(zip(by, key)), "steps": both.steps, "drafted": both.drafted,
                     "accepted": both.accepted, "acceptance_rate": ratios.acceptance_rate(both),
                     "mean_accepted": ratios.mean_accepted(spec),
                     "tokens_per_step": ratios.tokens_per_step(both),
                     "draft_seconds_per_step": ratios.seconds_per_step(both.draft_seconds, both),
                     "verify_seconds_per_step": ratios.seconds_per_step(both.verify_seconds, both),
                     "expected_acceptance": ratios.expected_acceptance(both),
                     "speedup": ratios.speedup(spec, baseline)})
    return rows


def _by_load(conn: sa.Connection, query: StatsQuery, now: float) -> StatsResult:
    """Requests by the load they met, from ``load_hours`` (storage/loads.py): whole hours."""
    t = schema.load_hours.c
    until = int(math.ceil(query.until)) if query.until is not None else \
        int(max(now, conn.execute(sa.select(sa.func.max(t.bucket_start))).scalar() or 0)) + loads.HOUR
    since = int(math.floor(query.since)) if query.since is not None else \
        int(conn.execute(sa.select(sa.func.min(t.bucket_start))).scalar() or until)
    since = floor_to(since, loads.HOUR)
    rows = loads.stats(conn, since, until, query.by, query.domain)
    return StatsResult(query.by, rows, Plan((Segment("load_hour", since, until),), since, until))


def _position_rows(groups: dict[tuple, list], by: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{**dict(zip(by, key)), "reached": reached, "accepted": accepted,
             "conditional_acceptance": ratios.conditional_acceptance(reached, accepted)}
            for key, (reached, accepted) in sorted(groups.items())]
