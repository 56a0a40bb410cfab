"""The alert lifecycle: pending -> firing -> resolved, deduplicated by labels, re-sent while firing,
rate limited, persisted in the store and handed to the sinks' delivery workers.

``fire`` / ``resolve`` / ``handle`` run on the hot path: they change in-memory state under a short lock
and do no I/O. ``tick`` runs on the scheduler thread: it moves pending alerts to firing, resolves stale
ones, persists changes and queues them (and due re-sends) for delivery; the sinks send on their own
threads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from alerts.alert import SEVERITIES, Alert, alert_type, describe
from alerts.config import AlertConfig
from alerts.delivery import Delivery
from alerts.limit import RateLimit
from alerts.sinks.base import Sink

log = logging.getLogger("specwatch.alerts")
STATES = ("pending", "firing", "resolved", "all")


@dataclass
class _Active:
    alert: Alert  # starts_at is the pending time until the alert fires
    firing: bool = False
    last_fired: float = 0.0  # last fire() call: the event-like alerts resolve some time after it
    last_sent: float | None = None  # None: a change not yet handed to the sinks
    changed: bool = False  # annotations changed since the last hand-over
    held: bool = False  # counted once as suppressed by the rate limit

    @property
    def key(self) -> tuple[str, str]:
        return self.alert.labels["alertname"], self.alert.labels["domain"]


class AlertManager:
    """See the module docstring. ``store``: a ``storage.Store`` (or anything with ``save_alert`` and
    ``load_alerts``); None keeps alerts in memory only."""

    def __init__(self, sinks: Sequence[Sink], store: Any = None, *, pod: str,
                 config: AlertConfig | None = None, clock: Callable[[], float] = time.time):
        self.config = config or AlertConfig()
        self.pod = pod
        self.store = store
        self._clock = clock
        self._lock = threading.Lock()
        self._tick_lock = threading.Lock()  # one tick at a time (the scheduler's, or close's)
        self._active: dict[str, _Active] = {}  # by fingerprint
        self._resolved: deque[Alert] = deque(maxlen=self.config.max_resolved)
        self._outbox: list[Alert] = []  # resolved since the last tick
        self._unsaved: dict[tuple[str, float], Alert] = {}  # changes the store has not taken yet
        self._limit = RateLimit(self.config.rate_limit, self.config.rate_interval_seconds)
        self.suppressed = 0  # promotions to firing held back by the rate limit
        self.deliveries = [Delivery(sink, self.config) for sink in sinks]

    # -- hot path ------------------------------------------------------------------------------------
    def fire(self, alertname: str, domain: str, severity: str | None = None,
             annotations: dict[str, Any] | None = None) -> None:
        """Raise (or refresh) an alert. Severity defaults to the catalogue's; missing summary and action
        come from the catalogue too."""
        kind = alert_type(alertname)
        severity = severity or (kind.severity if kind else "warning")
        if not alertname or not isinstance(domain, str) or severity not in SEVERITIES:
            raise ValueError(f"an alert needs an alertname, a domain and a severity in {SEVERITIES}, got "
                             f"{alertname!r}, {domain!r}, {severity!r}")
        labels = {"alertname": alertname, "domain": domain, "severity": severity, "pod": self.pod}
        annotations = describe(alertname, domain, annotations or {})
        now = self._clock()
        with self._lock:
            alert = Alert(labels, annotations, now)
            entry = self._active.get(alert.fingerprint)
            if entry is None:
                self._active[alert.fingerprint] = _Active(alert, last_fired=now)
                return
            entry.last_fired = now
            annotations = _keep_first_summary(entry.alert.annotations, annotations)
            if entry.alert.annotations != annotations:
                entry.alert = replace(entry.alert, annotations=annotations)
                entry.changed = entry.firing

    def resolve(self, alertname: str, domain: str, annotations: dict[str, Any] | None = None) -> None:
        """Resolve the alert(s) of this name and domain, whatever their severity. A pending one is
        dropped: it never fired."""
        with self._lock:
            self._resolve_key((alertname, domain), self._clock(), annotations)

    def handle(self, finding: Any) -> None:
        """Fire from a detector's Finding (alertname, domain, severity, annotations, detector)."""
        annotations = dict(getattr(finding, "annotations", None) or {})
        detector = getattr(finding, "detector", "")
        if detector:
            annotations.setdefault("detector", detector)
        if getattr(finding, "resolves", False):
            self.resolve(finding.alertname, finding.domain, annotations)
            return
        self.fire(finding.alertname, finding.domain, getattr(finding, "severity", None), annotations)

    # -- scheduler thread ----------------------------------------------------------------------------
    def tick(self, now: float | None = None) -> None:
        """Advance the lifecycle to ``now``, persist what changed, queue it and due re-sends."""
        with self._tick_lock:
            self._tick(self._clock() if now is None else now)

    def _tick(self, now: float) -> None:
        with self._lock:
            self._promote(now)
            self._expire(now)
            changes, resends = self._outbox, []
            self._outbox = []
            for entry in self._active.values():
                if not entry.firing:
                    continue
                if entry.last_sent is None or entry.changed:
                    changes.append(entry.alert)
                elif now - entry.last_sent >= self.config.resend_seconds:
                    resends.append(entry.alert)
                else:
                    continue
                entry.last_sent, entry.changed = now, False
            self._forget(now)
        self._persist(changes, now)
        for delivery in self.deliveries:
            delivery.submit(changes + resends if delivery.sink.resend else changes)

    def _promote(self, now: float) -> None:
        for entry in sorted(self._active.values(), key=lambda e: e.alert.starts_at):
            if (self._active.get(entry.alert.fingerprint) is not entry or entry.firing
                    or now - entry.alert.starts_at < self.config.pending_seconds):
                continue  # resolved earlier in this loop, already firing, or not pending long enough
            if not self._limit.allow(entry.key, now):
                self.suppressed += 0 if entry.held else 1
                entry.held = True
                continue
            # A new severity of the same alert replaces the firing one once it fires itself; so do the
            # types this one resolves (SpeculationRestored resolves SpeculationDisabled).
            for other in [e for e in self._active.values() if e.key == entry.key and e.firing and e is not entry]:
                self._end(other, now)
            kind = alert_type(entry.key[0])
            for name in kind.resolves if kind else ():
                self._resolve_key((name, entry.key[1]), now)
            entry.firing, entry.last_sent = True, None
            entry.alert = replace(entry.alert, starts_at=now)

    def _expire(self, now: float) -> None:
        timeout = self.config.resolve_timeout_seconds
        if timeout is None:
            return
        for entry in list(self._active.values()):
            kind = alert_type(entry.key[0])
            if entry.firing and (kind is None or kind.auto_resolve) and now - entry.last_fired >= timeout:
                self._end(entry, now)

    def _resolve_key(self, key: tuple[str, str], now: float, annotations: dict | None = None) -> None:
        for entry in [e for e in self._active.values() if e.key == key]:
            if annotations:
                notes = {str(k): str(v) for k, v in annotations.items()}
                entry.alert = replace(entry.alert, annotations={**entry.alert.annotations, **notes})
            self._end(entry, now)

    def _end(self, entry: _Active, now: float) -> None:
        del self._active[entry.alert.fingerprint]
        if entry.firing and entry.last_sent is not None:  # else it fired in this tick, unannounced
            resolved = replace(entry.alert, ends_at=max(now, entry.alert.starts_at))
            self._outbox.append(resolved)
            self._resolved.append(resolved)

    def _forget(self, now: float) -> None:
        while self._resolved and self._resolved[0].ends_at < now - self.config.keep_resolved_seconds:
            self._resolved.popleft()
        self._limit.forget(now)

    def _persist(self, changes: list[Alert], now: float) -> None:
        if self.store is None:
            return
        for alert in changes:
            self._unsaved[(alert.fingerprint, alert.starts_at)] = alert
        for key, alert in list(self._unsaved.items()):
            try:
                self.store.save_alert(alert, now=now)
            except Exception as exc:  # the database may be down: keep the change for the next tick
                log.warning("could not save alert %s (%d unsaved): %s", alert.labels.get("alertname"),
                            len(self._unsaved), exc)
                return
            del self._unsaved[key]

    # -- queries -------------------------------------------------------------------------------------
    def alerts(self, state: str = "firing") -> list[Alert]:
        """Alerts by state: pending, firing, resolved (the recent ones kept in memory), or all (firing and
        resolved; pending ones have not been announced). Oldest first."""
        if state not in STATES:
            raise ValueError(f"alert state must be one of {', '.join(STATES)}, got {state!r}")
        with self._lock:
            active = [(e.alert, e.firing) for e in self._active.values()]
            resolved = list(self._resolved)
        out = [a for a, firing in active if firing == (state != "pending")] if state != "resolved" else []
        if state in ("resolved", "all"):
            out += resolved
        return sorted(out, key=lambda a: a.starts_at)

    def firing(self) -> list[Alert]:
        return self.alerts("firing")

    def firing_counts(self) -> dict[str, int]:
        """Firing alerts per alertname (for specwatch_alerts_firing)."""
        counts: dict[str, int] = {}
        for alert in self.firing():
            counts[alert.labels["alertname"]] = counts.get(alert.labels["alertname"], 0) + 1
        return counts

    # -- start and stop ------------------------------------------------------------------------------
    def load(self) -> "AlertManager":
        """Take back this pod's firing alerts (and recently resolved ones) from the store after a restart;
        the next tick re-sends the firing ones."""
        if self.store is None:
            return self
        now = self._clock()
        # Resolved alerts by start time: one that started long ago but resolved recently is left out.
        stored = [*self.store.load_alerts("firing"),
                  *self.store.load_alerts("resolved", since=now - self.config.keep_resolved_seconds)]
        mine = sorted((Alert.of(s) for s in stored if s.labels.get("pod") == self.pod),
                      key=lambda a: a.starts_at)
        with self._lock:
            for alert in mine:
                if alert.ends_at is None:
                    self._active[alert.fingerprint] = _Active(alert, firing=True, last_fired=now,
                                                              last_sent=float("-inf"))
                elif alert.ends_at >= now - self.config.keep_resolved_seconds:
                    self._resolved.append(alert)
        return self

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every sink has sent what it was given; False if one did not within ``timeout``."""
        deadline = time.monotonic() + timeout
        return all([d.wait_idle(max(0.0, deadline - time.monotonic())) for d in self.deliveries])

    def close(self, timeout: float = 5.0) -> None:
        """A last tick (persist and queue), then drain the sinks for up to ``timeout`` seconds in all."""
        self.tick()
        deadline = time.monotonic() + timeout
        for delivery in self.deliveries:
            delivery.close(max(0.0, deadline - time.monotonic()))


UPDATES_KEPT = 5  # later summaries of an alert that is still active, newest last


def _keep_first_summary(old: dict[str, str], new: dict[str, str]) -> dict[str, str]:
    """A refreshed alert keeps the summary it was raised with (what the operator was first told); a
    different later one is appended to ``updates`` (the last few, " | "-separated) instead of replacing it."""
    first, latest = old.get("summary"), new.get("summary")
    if first is None or latest is None or latest == first:
        return {**new, **({"updates": old["updates"]} if "updates" in old else {})}
    updates = [u for u in old.get("updates", "").split(" | ") if u]
    if not updates or updates[-1] != latest:
        updates.append(latest)
    return {**new, "summary": first, "updates": " | ".join(updates[-UPDATES_KEPT:])}
