"""The alert lifecycle with a settable clock: pending -> firing -> resolved, deduplication, re-sends,
rate limit, superseding, automatic resolution, and what fire() must not do (I/O)."""

import threading
from types import SimpleNamespace

import pytest

from alerts.config import AlertConfig
from alerts.manager import AlertManager
from alert_fakes import T0, Clock, RecordingSink

DRIFT = {"acceptance_before": "0.71", "acceptance_after": "0.35"}


@pytest.fixture
def clock():
    return Clock(T0)


@pytest.fixture
def sink():
    return RecordingSink("am", resend=True)


@pytest.fixture
def quiet():
    return RecordingSink("hook", resend=False)


@pytest.fixture
def make(clock, sink, quiet):
    made = []

    def make(store=None, **config) -> AlertManager:
        manager = AlertManager([sink, quiet], store, pod="pod-1", config=AlertConfig(**config), clock=clock)
        made.append(manager)
        return manager

    yield make
    for manager in made:
        manager.close(timeout=2)


def tick(manager, clock, at):
    clock.now = at
    manager.tick()
    assert manager.flush(timeout=5)


def test_pending_then_firing_after_for(make, clock, sink):
    m = make(pending_seconds=30)
    m.fire("AcceptanceDrift", "code", "warning", DRIFT)
    tick(m, clock, T0 + 29)
    assert sink.sent == [] and m.firing() == []
    [pending] = m.alerts("pending")
    assert pending.labels == {"alertname": "AcceptanceDrift", "domain": "code", "severity": "warning",
                              "pod": "pod-1"}
    tick(m, clock, T0 + 30)
    [alert] = sink.sent
    assert alert.state == "firing" and alert.starts_at == T0 + 30 and alert.ends_at is None
    assert alert.annotations["summary"] == "Acceptance in code moved from 0.71 to 0.35"
    assert "action" in alert.annotations and m.alerts("pending") == []


def test_zero_for_fires_at_next_tick_and_resolve_while_pending_drops(make, clock, sink):
    m = make(pending_seconds=0)
    m.fire("AcceptanceDrift", "code", annotations=DRIFT)
    tick(m, clock, T0)
    assert [a.state for a in sink.sent] == ["firing"]
    m2 = make(pending_seconds=60)
    m2.fire("StaleDraft", "chat")
    m2.resolve("StaleDraft", "chat")
    tick(m2, clock, T0 + 120)
    assert m2.alerts("all") == [] and len(sink.sent) == 1  # never fired, so never announced


def test_deduplicated_by_labels_and_annotation_changes_resent(make, clock, sink, quiet):
    m = make()
    for _ in range(5):
        m.fire("AcceptanceDrift", "code", "warning", DRIFT)
    m.fire("AcceptanceDrift", "chat", "warning", DRIFT)
    tick(m, clock, T0)
    assert sorted(sink.states()) == [("AcceptanceDrift", "chat", "firing"), ("AcceptanceDrift", "code", "firing")]
    assert len(m.firing()) == 2
    clock.now = T0 + 5
    m.fire("AcceptanceDrift", "code", "warning", DRIFT)  # same labels, same annotations: nothing new
    tick(m, clock, T0 + 5)
    assert len(sink.sent) == 2
    m.fire("AcceptanceDrift", "code", "warning", {**DRIFT, "acceptance_after": "0.30"})
    tick(m, clock, T0 + 10)
    [updated] = sink.sent[2:]
    assert updated.annotations["acceptance_after"] == "0.30" and updated.starts_at == T0  # same alert
    assert len(quiet.sent) == 3  # a change reaches every sink


def test_resent_every_60_seconds_to_sinks_that_want_it(make, clock, sink, quiet):
    m = make()
    m.fire("SpeculationDisabled", "code", annotations={"reason": "goodput below K = 0"})
    tick(m, clock, T0)
    tick(m, clock, T0 + 59)
    assert len(sink.sent) == 1
    tick(m, clock, T0 + 60)
    tick(m, clock, T0 + 119)
    assert len(sink.sent) == 2 and sink.sent[1].starts_at == T0
    tick(m, clock, T0 + 120)
    assert len(sink.sent) == 3 and len(quiet.sent) == 1


def test_resolve_sets_ends_at(make, clock, sink, quiet):
    m = make()
    m.fire("SpeculationDisabled", "code", annotations={"reason": "slow"})
    tick(m, clock, T0)
    clock.now = T0 + 300
    m.resolve("SpeculationDisabled", "code", {"resolution": "speculation back on"})
    assert m.firing() == []  # at once, before the tick
    tick(m, clock, T0 + 301)
    resolved = sink.sent[-1]
    assert resolved.state == "resolved" and resolved.ends_at == T0 + 300 and resolved.starts_at == T0
    assert resolved.annotations["resolution"] == "speculation back on"
    assert resolved.annotations["summary"] == "Speculation turned off in code: slow"  # kept
    assert quiet.states() == [("SpeculationDisabled", "code", "firing"), ("SpeculationDisabled", "code",
                                                                           "resolved")]
    assert m.alerts("resolved") == [resolved] and m.alerts("all") == [resolved]
    tick(m, clock, T0 + 1000)
    assert len(sink.sent) == 2  # no re-sends once resolved


def test_rate_limit_holds_new_notifications_per_alertname_and_domain(make, clock, sink):
    m = make(rate_limit=2, rate_interval_seconds=600)
    for i in range(3):  # flapping: fire, resolve, fire, ...
        m.fire("AcceptanceDrift", "code", annotations=DRIFT)
        tick(m, clock, T0 + 10 * i)
        m.resolve("AcceptanceDrift", "code")
    m.fire("AcceptanceDrift", "chat", annotations=DRIFT)  # another domain has its own budget
    tick(m, clock, T0 + 30)
    code = [s for s in sink.states() if s[1] == "code" and s[2] == "firing"]
    assert len(code) == 2 and ("AcceptanceDrift", "chat", "firing") in sink.states()
    assert m.suppressed == 1 and m.alerts("pending") == []  # the third was resolved while held
    m.fire("AcceptanceDrift", "code", annotations=DRIFT)
    tick(m, clock, T0 + 599)
    assert len(m.alerts("pending")) == 1 and m.suppressed == 2
    tick(m, clock, T0 + 600)  # the first notification has left the window
    assert [a.labels["domain"] for a in m.firing()] == ["chat", "code"] and m.suppressed == 2


def test_a_new_severity_replaces_the_old_once_it_fires(make, clock, sink):
    m = make()
    m.fire("AcceptanceDrift", "code", "warning", DRIFT)
    tick(m, clock, T0)
    m.fire("AcceptanceDrift", "code", "critical", DRIFT)
    tick(m, clock, T0 + 1)
    assert [(a.labels["severity"], a.state) for a in sink.sent] == [
        ("warning", "firing"), ("warning", "resolved"), ("critical", "firing")]
    assert [a.labels["severity"] for a in m.firing()] == ["critical"]
    m.fire("StaleDraft", "chat", "warning")
    m.fire("StaleDraft", "chat", "critical")  # both pending at one tick: only the later is announced
    tick(m, clock, T0 + 2)
    assert [(a.labels["severity"], a.state) for a in sink.sent[3:]] == [("critical", "firing")]


def test_restored_resolves_disabled(make, clock, sink):
    m = make()
    m.fire("SpeculationDisabled", "code", annotations={"reason": "goodput 0.8x"})
    tick(m, clock, T0)
    m.fire("SpeculationRestored", "code", annotations={"reason": "goodput 1.4x"})
    tick(m, clock, T0 + 1)
    assert sink.states()[1:] == [("SpeculationDisabled", "code", "resolved"),
                                 ("SpeculationRestored", "code", "firing")]
    assert sink.sent[-1].labels["severity"] == "info"
    assert sink.sent[-1].annotations["summary"] == "Speculation turned back on in code: goodput 1.4x"


def test_event_alerts_resolve_after_the_timeout_conditions_do_not(make, clock, sink):
    m = make(resolve_timeout_seconds=600)
    m.fire("AcceptanceDrift", "code", annotations=DRIFT)
    m.fire("SpeculationDisabled", "code", annotations={"reason": "slow"})
    tick(m, clock, T0)
    clock.now = T0 + 500
    m.fire("AcceptanceDrift", "code", annotations=DRIFT)  # still detected: the timeout starts again
    tick(m, clock, T0 + 1099)
    assert len(m.firing()) == 2
    tick(m, clock, T0 + 1100)
    assert [a.labels["alertname"] for a in m.firing()] == ["SpeculationDisabled"]
    assert ("AcceptanceDrift", "code", "resolved") in sink.states()


def test_handle_duck_types_a_finding(make, clock, sink):
    m = make()
    finding = SimpleNamespace(alertname="StaleDraft", domain="code", severity="critical", detector="cusum",
                              annotations={"draft_version": "d1", "target_version": "t2"})
    m.handle(finding)
    tick(m, clock, T0)
    [alert] = sink.sent
    assert alert.labels["severity"] == "critical" and alert.annotations["detector"] == "cusum"
    assert alert.annotations["summary"] == "Draft d1 no longer matches target t2 in code"
    assert m.firing_counts() == {"StaleDraft": 1}


def test_fire_validates_and_defaults_severity(make):
    m = make()
    with pytest.raises(ValueError, match="severity in"):
        m.fire("AcceptanceDrift", "code", "bad")
    m.fire("Custom", "code", annotations={"summary": "x", "n": 3})
    assert m.alerts("pending")[0].labels["severity"] == "warning"
    assert m.alerts("pending")[0].annotations == {"summary": "x", "n": "3"}
    with pytest.raises(ValueError, match="alert state"):
        m.alerts("open")


class CountingStore:
    """Counts calls; fails the first ``fail`` saves (a database that is down)."""

    def __init__(self, fail: int = 0):
        self.saved, self.fail = [], fail

    def save_alert(self, alert, now=None):
        if self.fail:
            self.fail -= 1
            raise ConnectionError("database down")
        self.saved.append(alert)


def test_hot_path_does_no_io_and_unsaved_changes_wait_for_the_database(make, clock):
    store = CountingStore(fail=1)
    m = make(store)
    m.fire("AcceptanceDrift", "code", annotations=DRIFT)
    m.fire("AcceptanceDrift", "chat", annotations=DRIFT)
    assert store.saved == []  # fire() only changes memory
    tick(m, clock, T0)  # the first save fails: both stay unsaved
    assert store.saved == []
    m.resolve("AcceptanceDrift", "code")
    tick(m, clock, T0 + 1)
    # the newest state of each alert is what gets saved
    assert sorted((a.labels["domain"], a.state) for a in store.saved) == [("chat", "firing"), ("code", "resolved")]


def test_concurrent_fire_and_tick(make, clock, sink):
    m = make()
    domains = [f"d{i}" for i in range(20)]

    def hot(offset):
        for n in range(200):
            m.fire("AcceptanceDrift", domains[(n + offset) % 20], annotations=DRIFT)

    threads = [threading.Thread(target=hot, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for i in range(50):
        m.tick(T0 + i)
    for t in threads:
        t.join()
    tick(m, clock, T0 + 100)
    assert len(m.firing()) == 20 and len({a.fingerprint for a in sink.sent}) == 20
    assert sum(s[2] == "firing" for s in sink.states()) >= 20


def test_a_refreshed_alert_keeps_its_first_summary_and_appends_later_ones(make, clock, sink):
    m = make(pending_seconds=0)
    m.fire("SpeculationDisabled", "logs", None, {"reason": "off: the policy ran K=0"})
    tick(m, clock, T0)
    first = m.firing()[0].annotations["summary"]
    assert "the policy ran K=0" in first
    for i, reason in enumerate(("off: acceptance collapsed", "off: probes lose", "off: probes lose")):
        clock.now = T0 + 1 + i
        m.fire("SpeculationDisabled", "logs", None, {"reason": reason})
    tick(m, clock, T0 + 10)
    [alert] = m.firing()
    assert alert.annotations["summary"] == first
    assert alert.annotations["updates"] == ("Speculation turned off in logs: off: acceptance collapsed | "
                                            "Speculation turned off in logs: off: probes lose")
    assert alert.annotations["reason"] == "off: probes lose"  # the other annotations are the latest
    stored = sink.sent[-1]
    assert stored.annotations["summary"] == first and "acceptance collapsed" in stored.annotations["updates"]
