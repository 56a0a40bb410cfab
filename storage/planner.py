"""Tier selection: answer a time range from the coarsest tier that answers each part of it exactly.

A tier answers a stretch exactly when the stretch is whole buckets of it, its rows there are complete (not
pruned) and up to date (no dirty mark: nothing was written below since the last rollup). The range is
tiled coarse-first: hours for the whole clean hours inside it, minutes for the whole minutes around
those, windows for the rest. Pure: no SQL.

A partial bucket at an edge that is mostly inside the range is answered as that bucket less the next finer
tier's buckets outside the range (a complement): ``--since 30d`` at 00:59 reads the first day's row and
subtracts its first hour, instead of adding its 23 other hours (at 1000 pods 22,000 rows instead of
506,000). Sums and counts subtract exactly (sums of seconds to the last bits of a float).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from storage.sql import ceil_to, floor_to


@dataclass(frozen=True)
class TierView:
    """What the planner needs to know of a tier over the queried range."""

    name: str
    seconds: int
    available_from: int = 0
    dirty: frozenset[int] = field(default_factory=frozenset)  # starts of buckets behind the tier below
    rolled_until: float = math.inf  # buckets ending after it were never rolled up (not used in a complement)


@dataclass(frozen=True)
class Segment:
    """[start, end) answered by ``tier``; with ``whole`` (a complement), by its bucket ``whole`` less the
    buckets of the finer tier ``minus`` in ``whole`` outside [start, end)."""

    tier: str
    start: int
    end: int
    whole: tuple[int, int] | None = None
    minus: str | None = None

    def reads(self) -> list[tuple[str, int, int, int]]:
        """(tier, start, end, sign): the ranges of tiers to sum (sign 1) or subtract (sign -1)."""
        if self.whole is None or self.minus is None:
            return [(self.tier, self.start, self.end, 1)]
        lo, hi = self.whole
        less = [(self.minus, a, b, -1) for a, b in ((lo, self.start), (self.end, hi)) if a < b]
        return [(self.tier, lo, hi, 1), *less]


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
    out, at, end, tail = [], lo, hi, []
    if a <= b:  # the edges are parts of different buckets: each may be a complement
        head = _complement(tier, finer[0], a - tier.seconds, lo, a)
        if head is not None:
            out, at = _cover(lo, head.start, finer) + [head], a
        last = _complement(tier, finer[0], b, b, hi)
        if last is not None:
            tail, end = [last] + _cover(last.end, hi, finer), b
    for x, y in _clean_runs(a, b, tier):
        out += _cover(at, x, finer)
        out.append(Segment(tier.name, x, y))
        at = y
    return out + _cover(at, end, finer) + tail


def _complement(tier: TierView, finer: TierView, bucket: int, lo: int, hi: int) -> Segment | None:
    """[lo, hi) inside ``tier``'s bucket starting at ``bucket``, as that bucket less ``finer``'s whole buckets
    outside it (what is left of it below ``finer``'s grain is covered by the finer tiers), when that reads
    fewer of ``finer``'s buckets than adding them would; None when it does not, or cannot."""
    end = bucket + tier.seconds
    inner = (ceil_to(lo, finer.seconds), floor_to(hi, finer.seconds))
    if not bucket <= lo < hi <= end or lo == bucket and hi == end or inner[0] >= inner[1]:
        return None
    outside = (inner[0] - bucket) + (end - inner[1])
    if outside >= inner[1] - inner[0] or bucket < max(tier.available_from, finer.available_from):
        return None
    if end > tier.rolled_until or bucket in tier.dirty or any(bucket <= d < end for d in finer.dirty):
        return None  # a bucket reaching past ``until`` may still be open: only one rolled up and clean
    return Segment(tier.name, inner[0], inner[1], (bucket, end), finer.name)


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
