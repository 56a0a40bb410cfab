"""Tier selection: answer a time range from the coarsest tier that answers each part of it exactly.

A tier answers a stretch exactly when the stretch is whole buckets of it, its rows there are complete (not
pruned) and up to date (no dirty mark: nothing was written below since the last rollup). The range is
tiled coarse-first: hours for the whole clean hours inside it, minutes for the whole minutes around
those, windows for the rest. Pure: no SQL.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from storage.sql import ceil_to, floor_to


@dataclass(frozen=True)
class TierView:
    """What the planner needs to know of a tier over the queried range."""

    name: str
    seconds: int
    available_from: int = 0
    dirty: frozenset[int] = field(default_factory=frozenset)  # starts of buckets behind the tier below


@dataclass(frozen=True)
class Segment:
    tier: str
    start: int
    end: int


@dataclass(frozen=True)
class Plan:
    segments: tuple[Segment, ...]
    since: int
    until: int

    @property
    def missing(self) -> list[tuple[int, int]]:
        """Parts of [since, until) no tier holds complete data for (pruned before the range began)."""
        gaps, at = [], self.since
        for s in self.segments:
            if s.start > at:
                gaps.append((at, s.start))
            at = max(at, s.end)
        if at < self.until:
            gaps.append((at, self.until))
        return gaps

    @property
    def exact(self) -> bool:
        return not self.missing

    def tiers_used(self) -> dict[str, int]:
        """Seconds of the range answered by each tier."""
        used: dict[str, int] = {}
        for s in self.segments:
            used[s.tier] = used.get(s.tier, 0) + s.end - s.start
        return used


def plan(since: int, until: int, views: list[TierView]) -> Plan:
    """Tile [since, until) with ``views`` given finest first; the finest is used for whatever is left."""
    if since >= until:
        return Plan((), since, until)
    return Plan(tuple(_cover(since, until, views[::-1])), since, until)


def _cover(lo: int, hi: int, coarse_first: list[TierView]) -> list[Segment]:
    if lo >= hi:
        return []
    tier, finer = coarse_first[0], coarse_first[1:]
    if not finer:
        start = max(lo, tier.available_from)
        return [Segment(tier.name, start, hi)] if start < hi else []
    a, b = ceil_to(max(lo, tier.available_from), tier.seconds), floor_to(hi, tier.seconds)
    out, at = [], lo
    for x, y in _clean_runs(a, b, tier):
        out += _cover(at, x, finer)
        out.append(Segment(tier.name, x, y))
        at = y
    return out + _cover(at, hi, finer)


def _clean_runs(a: int, b: int, tier: TierView) -> list[tuple[int, int]]:
    """[a, b) minus the tier's dirty buckets, as runs of whole buckets."""
    runs, at = [], a
    for d in sorted(x for x in tier.dirty if a <= x < b):
        if d > at:
            runs.append((at, d))
        at = d + tier.seconds
    if at < b:
        runs.append((at, b))
    return runs
