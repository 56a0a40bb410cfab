"""Events beside the step history: model versions seen, speculation on/off, policy decisions, alerts."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from storage import schema
from storage.errors import StoreError
from storage.sql import upsert


@dataclass(frozen=True)
class VersionSeen:
    pod: str
    role: str  # target or draft
    version: str
    first_seen: float
    last_seen: float


@dataclass(frozen=True)
class Transition:
    ts: float
    pod: str
    domain: str
    enabled: bool
    reason: str


@dataclass(frozen=True)
class Decision:
    ts: float
    pod: str
    domain: str
    lookahead: int
    speculate: bool
    policy: str
    reason: str

    def same_choice(self, other: "Decision | None") -> bool:
        return other is not None and (self.lookahead, self.speculate, self.policy) == (
            other.lookahead, other.speculate, other.policy)


@dataclass(frozen=True)
class StoredAlert:
    """An alert as Alertmanager sees it: labels identify it, annotations explain it."""

    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: float
    ends_at: float | None = None  # set once resolved

    @property
    def state(self) -> str:
        return "firing" if self.ends_at is None else "resolved"

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.labels)


def fingerprint(labels: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(labels, sort_keys=True).encode()).hexdigest()[:32]


def versions(conn: sa.Connection) -> list[VersionSeen]:
    v = schema.model_versions.c
    rows = conn.execute(sa.select(v.pod, v.role, v.version, v.first_seen, v.last_seen)
                        .order_by(v.first_seen, v.pod, v.role))
    return [VersionSeen(*r) for r in rows]


def add_transition(conn: sa.Connection, t: Transition) -> None:
    conn.execute(sa.insert(schema.transitions).values(
        ts=t.ts, pod=t.pod, domain=t.domain, enabled=t.enabled, reason=t.reason))


def transitions(conn: sa.Connection, until: float, domain: str | None = None) -> list[Transition]:
    """Every transition before ``until`` (the earlier ones give the state when a range begins)."""
    t = schema.transitions.c
    stmt = sa.select(t.ts, t.pod, t.domain, t.enabled, t.reason).where(t.ts < until).order_by(t.ts, t.id)
    if domain is not None:
        stmt = stmt.where(t.domain == domain)
    return [Transition(*r) for r in conn.execute(stmt)]


def last_decision(conn: sa.Connection, pod: str, domain: str) -> Decision | None:
    d = schema.decisions.c
    row = conn.execute(sa.select(d.ts, d.pod, d.domain, d.lookahead, d.speculate, d.policy, d.reason)
                       .where(d.pod == pod, d.domain == domain).order_by(d.ts.desc(), d.id.desc())
                       .limit(1)).first()
    return Decision(*row) if row else None


def add_decision(conn: sa.Connection, decision: Decision) -> None:
    conn.execute(sa.insert(schema.decisions).values(**decision.__dict__))


def save_alert(conn: sa.Connection, alert: StoredAlert, now: float) -> None:
    """Insert or update the alert identified by (labels, starts_at)."""
    name = alert.labels.get("alertname")
    if not isinstance(name, str) or not name:
        raise StoreError("an alert needs an `alertname` label")
    upsert(conn, schema.alerts, [dict(
        fingerprint=alert.fingerprint, alertname=name, labels=json.dumps(alert.labels, sort_keys=True),
        annotations=json.dumps(alert.annotations, sort_keys=True), starts_at=alert.starts_at,
        ends_at=alert.ends_at, updated_at=now)], ["fingerprint", "starts_at"])


def load_alerts(conn: sa.Connection, state: str = "firing", since: float | None = None,
                until: float | None = None) -> list[StoredAlert]:
    """Alerts by state (firing, resolved, all), optionally those that started in [since, until)."""
    a = schema.alerts.c
    stmt = sa.select(a.labels, a.annotations, a.starts_at, a.ends_at).order_by(a.starts_at, a.id)
    where: dict[str, Any] = {"firing": a.ends_at.is_(None), "resolved": a.ends_at.is_not(None), "all": None}
    if state not in where:
        raise StoreError(f"alert state must be firing, resolved or all, got {state!r}")
    if where[state] is not None:
        stmt = stmt.where(where[state])
    if since is not None:
        stmt = stmt.where(a.starts_at >= since)
    if until is not None:
        stmt = stmt.where(a.starts_at < until)
    return [StoredAlert(json.loads(r.labels), json.loads(r.annotations), r.starts_at, r.ends_at)
            for r in conn.execute(stmt)]
