"""Fakes and helpers for the sidecar tests: a settable clock, recording metrics / watch / alerts, a store."""

from __future__ import annotations

from dataclasses import dataclass

from history import T0, step
from storage import Store


class Clock:
    def __init__(self, now: float = T0 + 100):
        self.now = now

    def __call__(self) -> float:
        return self.now


class FakeMetrics:
    def __init__(self):
        self.observed, self.decisions, self.drift, self.firing = [], [], {}, []

    def observe(self, record, domain=None) -> None:
        self.observed.append(record)

    def labels(self) -> list[str]:
        return []

    def set_decision(self, domain, lookahead, speculate) -> None:
        self.decisions.append((domain, lookahead, speculate))

    def set_drift(self, domain, detector, value) -> None:
        self.drift[(domain, detector)] = value

    def set_alerts_firing(self, counts) -> None:
        self.firing.append(dict(counts))

    def forget(self, domain) -> None:
        self.decisions = [d for d in self.decisions if d[0] != domain]
        self.drift = {k: v for k, v in self.drift.items() if k[0] != domain}


@dataclass(frozen=True)
class Finding:
    alertname: str
    domain: str
    severity: str = "warning"
    annotations: dict | None = None
    detector: str = "fake"


class FakeWatch:
    """Finds "AcceptanceDrift" for every record of a domain in ``drifting``; statistic = records seen."""

    def __init__(self, drifting: tuple[str, ...] = ()):
        self.drifting, self.seen = drifting, []

    def observe(self, record):
        self.seen.append(record)
        return [Finding("AcceptanceDrift", record.domain)] if record.domain in self.drifting else []

    def forget(self, domain):
        self.seen = [r for r in self.seen if r.domain != domain]

    def statistics(self):
        out = {}
        for r in self.seen:
            out[(r.domain, "count")] = out.get((r.domain, "count"), 0) + 1
        return out


class FakeAlerts:
    def __init__(self):
        self.calls, self.ticks, self.closed = [], 0, False

    def fire(self, alertname, domain, severity=None, annotations=None):
        self.calls.append(("fire", alertname, domain))

    def resolve(self, alertname, domain, annotations=None):
        self.calls.append(("resolve", alertname, domain))

    def handle(self, finding):
        self.calls.append(("handle", finding.alertname, finding.domain))

    def tick(self, now=None):
        self.ticks += 1

    def firing_counts(self):
        return {"AcceptanceDrift": 1}

    def close(self, timeout=5.0):
        self.closed = True


def open_store(tmp_path, clock, name: str = "sidecar.db") -> Store:
    return Store.open(f"sqlite:///{tmp_path / name}", clock=clock, backfill=True)


def losing_steps(domain: str, n: int, start: float, *, k: int = 4) -> list:
    """Steps where speculation loses: K=0 takes 10 ms per token, K=k accepts nothing in 40 ms."""
    out = []
    for i in range(n):
        if i % 2:
            out.append(step(domain, 0, 0, start + i * 0.01, draft_s=0.0, verify_s=0.010, expected=None))
        else:
            out.append(step(domain, k, 0, start + i * 0.01, draft_s=0.030, verify_s=0.010, expected=None))
    return out


__all__ = ["Clock", "FakeMetrics", "FakeWatch", "FakeAlerts", "Finding", "open_store", "losing_steps", "T0", "step"]
