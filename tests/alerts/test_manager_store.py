"""Alerts persisted in the store and taken back after a restart, on SQLite and on PostgreSQL (the storage
tests' database fixtures: a fresh PostgreSQL schema per test)."""

import importlib.util
from pathlib import Path

import pytest

from alerts.config import AlertConfig
from alerts.manager import AlertManager
from alert_fakes import T0, Clock, RecordingSink
from storage import Store, StoredAlert

_spec = importlib.util.spec_from_file_location("storage_test_databases",
                                               Path(__file__).parents[1] / "storage" / "conftest.py")
_databases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_databases)
pg_admin, db_url = _databases.pg_admin, _databases.db_url  # fixtures, used by name below

DRIFT = {"acceptance_before": "0.71", "acceptance_after": "0.35"}


@pytest.fixture
def clock():
    return Clock(T0)


@pytest.fixture
def open_store(db_url, clock):
    opened = []

    def open_() -> Store:
        store = Store.open(db_url, clock=clock)
        opened.append(store)
        return store

    yield open_
    for store in opened:
        store.close(flush=False)


def start(store, clock, *sinks, pod="pod-1"):
    return AlertManager(list(sinks), store, pod=pod, config=AlertConfig(), clock=clock)


def run(manager, clock, at):
    clock.now = at
    manager.tick()
    assert manager.flush(timeout=5)


def test_persisted_and_reloaded_after_a_restart(open_store, clock):
    first = start(open_store(), clock, RecordingSink())
    first.fire("SpeculationDisabled", "code", annotations={"reason": "goodput 0.8x"})
    first.fire("AcceptanceDrift", "chat", annotations=DRIFT)
    first.fire("StaleDraft", "prose")
    run(first, clock, T0)
    clock.now = T0 + 10
    first.resolve("StaleDraft", "prose")
    run(first, clock, T0 + 10)
    first.close()

    store = open_store()
    assert sorted(a.labels["domain"] for a in store.load_alerts("firing")) == ["chat", "code"]
    [resolved] = store.load_alerts("resolved")
    assert resolved.labels["alertname"] == "StaleDraft" and resolved.ends_at == T0 + 10
    # another pod writing to the same database keeps its own alerts
    store.save_alert(StoredAlert({"alertname": "AcceptanceDrift", "domain": "code", "severity": "warning",
                                  "pod": "pod-2"}, {}, T0 + 5), now=T0 + 5)

    am, hook = RecordingSink("am", resend=True), RecordingSink("hook", resend=False)
    clock.now = T0 + 100
    second = start(store, clock, am, hook).load()
    firing = second.firing()
    assert [(a.labels["alertname"], a.starts_at) for a in firing] == [("SpeculationDisabled", T0),
                                                                      ("AcceptanceDrift", T0)]
    assert firing[1].annotations["acceptance_after"] == "0.35" and firing[1].labels["pod"] == "pod-1"
    assert [a.labels["alertname"] for a in second.alerts("resolved")] == ["StaleDraft"]
    run(second, clock, T0 + 100)
    assert len(am.sent) == 2 and hook.sent == []  # re-sent to Alertmanager, not announced again
    clock.now = T0 + 200
    second.fire("AcceptanceDrift", "chat", annotations=DRIFT)  # the same alert, not a new one
    second.fire("SpeculationRestored", "code", annotations={"reason": "goodput 1.3x"})
    run(second, clock, T0 + 200)
    second.close()

    rows = {(a.labels["alertname"], a.labels["pod"]): a for a in open_store().load_alerts("all")}
    assert rows["SpeculationDisabled", "pod-1"].ends_at == T0 + 200
    assert rows["AcceptanceDrift", "pod-1"].ends_at is None and rows["AcceptanceDrift", "pod-1"].starts_at == T0
    assert rows["SpeculationRestored", "pod-1"].starts_at == T0 + 200
    assert rows["AcceptanceDrift", "pod-2"].ends_at is None
    assert len(rows) == 5


def test_a_reloaded_alert_resolves_with_its_original_start(open_store, clock):
    first = start(open_store(), clock)
    first.fire("SpeculationDisabled", "code", annotations={"reason": "slow"})
    run(first, clock, T0)
    first.close()
    clock.now = T0 + 3600
    second = start(open_store(), clock).load()
    second.resolve("SpeculationDisabled", "code")
    second.close()
    [alert] = open_store().load_alerts("all")
    assert (alert.starts_at, alert.ends_at) == (T0, T0 + 3600)
