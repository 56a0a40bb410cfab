"""The sidecar with the real alert manager and metrics wired in."""

from __future__ import annotations

import math

from prometheus_client import generate_latest

from agent.hub.sidecar import Sidecar
from alerts.manager import AlertManager
from alerts.metrics.export import Metrics
from policies.registry import make
from sidecar_fakes import T0, Clock, losing_steps, open_store, step


class Sink:
    name, resend = "recording", False

    def __init__(self):
        self.sent = []

    def send(self, alerts):
        self.sent += list(alerts)

    def close(self):
        pass


def sample(metrics: Metrics, name: str, domain: str) -> float | None:
    for family in metrics.registry.collect():
        for s in family.samples:
            if s.name == name and s.labels.get("domain") == domain:
                return s.value
    return None


def test_speculation_off_fires_an_alert_persists_it_and_shows_in_metrics(tmp_path):
    clock = Clock(T0 + 100)
    store = open_store(tmp_path, clock)
    sink = Sink()
    alerts = AlertManager([sink], store, pod="pod-a", clock=clock)
    metrics = Metrics()
    sidecar = Sidecar(store, make("fixed:4+switch", seed=1), alerts=alerts, metrics=metrics, pod="pod-a",
                      clock=clock)
    sidecar.record_many(losing_steps("code", 400, T0) + [step("chat", 4, 3, T0)])
    sidecar.decide("code")
    sidecar.flush()
    assert sample(metrics, "specwatch_speculation_enabled", "code") == 0
    assert sample(metrics, "specwatch_steps_total", "code") == 400
    clock.now += 1
    sidecar.tick_alerts()
    (alert,) = alerts.firing()
    assert alert.labels == {"alertname": "SpeculationDisabled", "domain": "code", "severity": "warning",
                            "pod": "pod-a"}
    assert "K=0" in alert.annotations["reason"] and alert.annotations["summary"].startswith("Speculation turned off")
    assert b'specwatch_alerts_firing{alertname="SpeculationDisabled"} 1.0' in generate_latest(metrics.registry)
    sidecar.close(alert_timeout=2.0)
    assert [a.labels["alertname"] for a in sink.sent] == ["SpeculationDisabled"]
    again = open_store(tmp_path, clock)
    assert [a.labels["alertname"] for a in again.load_alerts("firing")] == ["SpeculationDisabled"]
    again.db.dispose()


def test_speculation_back_on_resolves_the_disabled_alert(tmp_path):
    clock = Clock(T0 + 100)
    store = open_store(tmp_path, clock)
    alerts = AlertManager([], store, pod="p", clock=clock)
    sidecar = Sidecar(store, make("fixed:4+switch", seed=1), alerts=alerts, pod="p", clock=clock)
    sidecar.record_many(losing_steps("code", 400, T0))
    sidecar.flush()
    sidecar.tick_alerts()
    assert [a.labels["alertname"] for a in alerts.firing()] == ["SpeculationDisabled"]
    # Now speculation pays: K=4 accepts everything in 12 ms (5 tokens), K=0 takes 10 ms per token.
    good = []
    for i in range(3000):
        k = 4 if i % 2 == 0 else 0
        good.append(step("code", k, k, T0 + 10 + i * 0.01, draft_s=0.002 * k / 4, verify_s=0.010, expected=None))
    sidecar.record_many(good)
    assert sidecar.switch.is_on("code")
    clock.now += 1
    sidecar.flush()
    sidecar.tick_alerts()
    # The restoration resolves SpeculationDisabled, saying why; nothing new fires for it.
    [disabled] = alerts.alerts("all")
    assert (disabled.labels["alertname"], disabled.state) == ("SpeculationDisabled", "resolved")
    assert disabled.annotations["restored"].startswith("on: ") and alerts.firing() == []
    assert [t.enabled for t in store.transitions(until=math.inf)] == [False, True]
    sidecar.close()


def drifting(seed: int, p: float, n: int, target: str) -> list:
    import random

    from specwatch_core.records import StepRecord

    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a = 0
        while a < 4 and rng.random() < p:
            a += 1
        out.append(StepRecord(domain="logs", lookahead=4, accepted=a, emitted=a + 1, draft_seconds=0.004,
                              verify_seconds=0.01, target_version=target, draft_version="d1",
                              accepted_mask=[1] * a + [0] * (4 - a), timestamp=T0 + 1,
                              expected_acceptance=[min(max(rng.gauss(p, 0.08), 0.0), 1.0) for _ in range(4)]))
    return out


def test_a_stale_draft_found_by_the_watch_becomes_a_firing_alert_and_a_drift_gauge(tmp_path):
    from alerts.watch import DriftWatch

    clock = Clock(T0 + 100)
    store = open_store(tmp_path, clock)
    alerts = AlertManager([], store, pod="p", clock=clock)
    metrics = Metrics()
    sidecar = Sidecar(store, make("heuristic+switch", seed=0), watch=DriftWatch(), alerts=alerts,
                      metrics=metrics, pod="p", clock=clock)
    for batch in (drifting(1, 0.9, 2000, "t1"), drifting(2, 0.4, 300, "t2")):
        for i in range(0, len(batch), 100):
            sidecar.record_many(batch[i:i + 100])
    sidecar.flush()
    sidecar.tick_alerts()
    (alert,) = alerts.firing()
    assert (alert.labels["alertname"], alert.labels["domain"]) == ("StaleDraft", "logs")
    assert alert.annotations["new_target_version"] == "t2"
    assert b'specwatch_drift_statistic{' in generate_latest(metrics.registry)
    sidecar.close()
