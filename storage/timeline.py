"""History over a range, for plotting: acceptance per domain over time, off periods, alerts, versions."""

from __future__ import annotations

from dataclasses import dataclass, field

from storage.events import StoredAlert, Transition, VersionSeen


@dataclass(frozen=True)
class Point:
    start: int  # bucket start, unix seconds
    acceptance: float | None  # None when nothing was drafted (speculation off)
    steps: int


@dataclass(frozen=True)
class OffPeriod:
    domain: str
    pod: str
    start: float
    end: float
    reason: str


@dataclass(frozen=True)
class History:
    since: int
    until: int
    bucket_seconds: int
    acceptance: dict[str, list[Point]]  # per domain, by time
    off: list[OffPeriod]
    alerts: list[StoredAlert]
    target_versions: list[VersionSeen]  # target versions first seen inside the range
    draft_versions: list[VersionSeen] = field(default_factory=list)  # likewise for the draft


def grain(since: float, until: float, finest: int = 60) -> str:
    """The time bucket that gives a readable number of points (about 60-600) for a range: 10 s up to 15
    minutes when the finest stored tier (``finest`` seconds, covering ``since``) can give it, then a minute
    up to 6 hours, 5 minutes up to 2 days, an hour up to 45 days (a month in hours keeps a two-day incident
    visible), else a day."""
    span = until - since
    if span <= 15 * 60 and 10 % finest == 0:
        return "10s"
    return ("minute" if span <= 6 * 3600 else "5m" if span <= 2 * 86400 else "hour" if span <= 45 * 86400
            else "day")


def off_periods(transitions: list[Transition], since: float, until: float) -> list[OffPeriod]:
    """Periods with speculation off, per pod and domain, clipped to [since, until)."""
    open_: dict[tuple[str, str], Transition] = {}
    spans = []
    for t in sorted(transitions, key=lambda t: t.ts):
        key = (t.pod, t.domain)
        if not t.enabled and key not in open_:
            open_[key] = t
        elif t.enabled and key in open_:
            off = open_.pop(key)
            spans.append(OffPeriod(t.domain, t.pod, off.ts, t.ts, off.reason))
    spans += [OffPeriod(t.domain, t.pod, t.ts, until, t.reason) for t in open_.values()]
    clipped = [OffPeriod(s.domain, s.pod, max(s.start, since), min(s.end, until), s.reason) for s in spans]
    return sorted((s for s in clipped if s.start < s.end), key=lambda s: (s.start, s.domain))


def target_changes(targets: list[VersionSeen], since: float, until: float) -> list[VersionSeen]:
    """Versions (of one role: targets, or drafts) that replaced an earlier one inside [since, until): the
    first sighting of each version across pods, leaving out each pod's very first one (nothing changed)."""
    first_of_pod: dict[str, float] = {}
    for v in targets:
        first_of_pod[v.pod] = min(first_of_pod.get(v.pod, v.first_seen), v.first_seen)
    earliest: dict[str, VersionSeen] = {}
    for v in sorted(targets, key=lambda v: v.first_seen):
        if v.first_seen > first_of_pod[v.pod] and v.version not in earliest:
            earliest[v.version] = v
    return [v for v in earliest.values() if since <= v.first_seen < until]
