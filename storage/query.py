"""``stats``: acceptance, accepted length, tokens and time per step, speed-up over K = 0, grouped."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from storage import ratios, schema
from storage.errors import StoreError
from storage.planner import Plan, Segment, TierView, plan
from storage.ratios import Totals
from storage.sql import bucket, floor_to
from storage.state import load_state
from storage.tierread import grouped
from storage.tiers import Tier

TIME_DIMS = {"10s": 10, "minute": 60, "5m": 300, "hour": 3600, "day": 86400}
SERIES_DIMS = ("domain", "lookahead", "target_version", "draft_version", "pod")
DIMENSIONS = (*SERIES_DIMS, *TIME_DIMS, "position")
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
    for segment in the_plan.segments:
        tier = tiers[segment.tier]
        packed = state[tier.name].packed_until if tier.blocks is not None else 0
        if segment.start < packed:  # hours in blocks: summed in Python (storage/tierread.py)
            for row in _packed(conn, tier, segment.start, min(segment.end, packed), query, positions):
                _accumulate(groups, row, query.by, positions)
        if max(segment.start, packed) < segment.end:
            part = Segment(segment.tier, max(segment.start, packed), segment.end)
            for row in conn.execute(_select(tier, part, query, positions)):
                _accumulate(groups, row, query.by, positions)
    rows = _position_rows(groups, query.by) if positions else _rows(groups, query.by)
    return StatsResult(query.by, rows, the_plan)


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
    for tier, start in conn.execute(sa.select(d.tier, d.bucket_start).where(
            d.bucket_start >= since - 3600, d.bucket_start < until)):
        marks.setdefault(tier, set()).add(start)
    # A bucket is behind when it or any finer bucket inside it was written since the last rollup.
    views = []
    for t in usable:
        behind = {floor_to(m, t.seconds) for s in usable if s.seconds <= t.seconds
                  for m in marks.get(s.name, ())}
        views.append(TierView(t.name, t.seconds, state[t.name].available_from, frozenset(behind)))
    return views


def _select(tier: Tier, segment: Segment, query: StatsQuery, positions: bool) -> sa.Select:
    src = tier.table
    s = schema.series.c
    dims = []
    for d in query.by:
        if d in SERIES_DIMS:
            dims.append(s[d])
        elif d in TIME_DIMS:
            dims.append(bucket(src.c.bucket_start, TIME_DIMS[d]))
    if positions:  # each row's counts cover positions 1..K of its K: group by K too
        dims.append(s.lookahead)
        measures = [sa.func.sum(src.c[c]) for c in schema.AT_LEAST]
    else:
        dims.append(sa.case((s.lookahead > 0, 1), else_=0))
        measures = [sa.func.sum(src.c[c]) for c in TOTALS]
    stmt = (sa.select(*dims, *measures)
            .select_from(src.join(schema.series, s.id == src.c.series_id))
            .where(src.c.bucket_start >= segment.start, src.c.bucket_start < segment.end)
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
    return grouped(conn, tier, lo, hi, key_of, schema.AT_LEAST if positions else TOTALS, query.domain)


def _accumulate(groups: dict[tuple, list], row, by: tuple[str, ...], positions: bool) -> None:
    n_dims = len(by)
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


def _position_rows(groups: dict[tuple, list], by: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{**dict(zip(by, key)), "reached": reached, "accepted": accepted,
             "conditional_acceptance": ratios.conditional_acceptance(reached, accepted)}
            for key, (reached, accepted) in sorted(groups.items())]
