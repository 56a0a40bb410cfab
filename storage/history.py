"""The history of a range, for plotting (``Store.history``): acceptance per domain over time at a readable
grain, with speculation-off periods, alerts and target and draft version changes, read in one transaction."""

from __future__ import annotations

import sqlalchemy as sa

from storage import events
from storage.query import TIME_DIMS, StatsQuery, stats, stored_until
from storage.state import load_state
from storage.tiers import Tier
from storage.timeline import History, Point, grain, off_periods, target_changes


def read_history(conn: sa.Connection, tiers: tuple[Tier, ...], now: float, since: float | None, until: float | None,
                 domain: str | None) -> History:
    until = stored_until(conn, tiers, now) if until is None else until
    if since is None:
        first = stats(conn, StatsQuery(until=until, by=("day",), domain=domain), tiers, until)
        since = first.rows[0]["day"] if first.rows else until - 86400
    finest = tiers[0]
    # The finest tier only where it still holds the whole range (older windows are pruned).
    kept = load_state(conn, tiers)[finest.name].available_from <= since
    step = grain(since, until, finest.seconds if kept else 60)
    result = stats(conn, StatsQuery(since, until, ("domain", step), domain), tiers, until)
    changes = events.transitions(conn, until, domain)
    alerts = [a for a in events.load_alerts(conn, "all", since, until)
              if domain is None or a.labels.get("domain") in (None, domain)]
    versions = events.versions(conn)
    acceptance: dict[str, list[Point]] = {}
    for row in result.rows:
        acceptance.setdefault(row["domain"], []).append(Point(row[step], row["acceptance_rate"], row["steps"]))
    role = {r: [v for v in versions if v.role == r] for r in ("target", "draft")}
    return History(int(since), int(until), TIME_DIMS[step], acceptance, off_periods(changes, since, until),
                   alerts, target_changes(role["target"], since, until), target_changes(role["draft"], since, until))
