"""Versions seen, speculation on/off, decisions when they change, alerts, and the plot's history."""

import pytest

from history import T0, step
from storage import StoredAlert, StoreError

H = 3600


def test_versions_seen_come_from_flushed_windows_and_explicit_calls(store):
    store.write_records([step(ts=T0 + 5), step(ts=T0 + 95, target="t2"), step(ts=T0 + 125, target="t2")])
    store.flush(T0 + 200)
    store.record_versions("t2", "d1", ts=T0 + 900, pod="pod-b")
    seen = {(v.pod, v.role, v.version): (v.first_seen, v.last_seen) for v in store.versions()}
    assert seen == {("local", "target", "t1"): (T0, T0 + 10), ("local", "draft", "d1"): (T0, T0 + 130),
                    ("local", "target", "t2"): (T0 + 90, T0 + 130),
                    ("pod-b", "target", "t2"): (T0 + 900, T0 + 900), ("pod-b", "draft", "d1"): (T0 + 900, T0 + 900)}
    store.record_versions("t1", "d1", ts=T0 - 50)  # an earlier sighting widens the range
    assert {(v.version, v.first_seen) for v in store.versions() if v.pod == "local" and v.role == "target"} \
        == {("t1", T0 - 50), ("t2", T0 + 90)}


def test_decisions_are_stored_only_when_they_change(store, make_store):
    assert store.record_decision("code", 4, True, "ucb", "best goodput", ts=T0)
    assert not store.record_decision("code", 4, True, "ucb", "still best", ts=T0 + 1)
    assert store.record_decision("code", 0, False, "ucb", "slower than target alone", ts=T0 + 2)
    assert store.record_decision("chat", 4, True, "ucb", ts=T0 + 3)
    restarted = make_store()  # knows the last decision from the database
    assert not restarted.record_decision("code", 0, False, "ucb", ts=T0 + 4)


def test_alerts_fire_resolve_and_load_by_state(store):
    labels = {"alertname": "AcceptanceDrop", "domain": "code", "severity": "warning", "pod": "local"}
    store.save_alert(StoredAlert(labels, {"summary": "acceptance 0.71 -> 0.35"}, starts_at=T0), now=T0)
    store.save_alert(StoredAlert({"alertname": "Other"}, {}, starts_at=T0 + 5), now=T0 + 5)
    assert [a.labels["alertname"] for a in store.load_alerts("firing")] == ["AcceptanceDrop", "Other"]
    store.save_alert(StoredAlert(labels, {"summary": "recovered"}, starts_at=T0, ends_at=T0 + H), now=T0 + H)
    [resolved] = store.load_alerts("resolved")
    assert (resolved.state, resolved.annotations, resolved.ends_at) == ("resolved", {"summary": "recovered"},
                                                                        T0 + H)
    assert len(store.load_alerts("all")) == 2 and len(store.load_alerts("all", since=T0 + 1)) == 1
    with pytest.raises(StoreError, match="alertname"):
        store.save_alert(StoredAlert({"domain": "x"}, {}, starts_at=T0))
    with pytest.raises(StoreError, match="firing, resolved or all"):
        store.load_alerts("open")


def test_history_has_acceptance_off_periods_alerts_and_versions(store):
    records = [step("code", 4, 3, T0 + m * 60) for m in range(0, 120, 2)]
    records += [step("code", 0, 0, T0 + m * 60, expected=None) for m in range(120, 180, 2)]
    records += [step("code", 4, 1, T0 + m * 60, target="t2") for m in range(180, 240, 2)]
    store.write_records(records)
    store.flush(T0 + 4 * H)
    store.rollup(T0 + 4 * H)
    store.record_transition("code", False, "slower than target alone", ts=T0 + 2 * H)
    store.record_transition("code", True, "re-enabled", ts=T0 + 3 * H)
    store.save_alert(StoredAlert({"alertname": "AcceptanceDrop", "domain": "code"}, {}, T0 + 3.5 * H))
    history = store.history(T0, T0 + 4 * H)
    assert history.bucket_seconds == 60
    points = history.acceptance["code"]
    assert points[0].acceptance == 0.75 and points[-1].acceptance == 0.25
    assert [p.acceptance for p in points if T0 + 2 * H <= p.start < T0 + 3 * H] == [None] * 30
    [off] = history.off
    assert (off.domain, off.start, off.end, off.reason) == ("code", T0 + 2 * H, T0 + 3 * H,
                                                            "slower than target alone")
    assert [a.starts_at for a in history.alerts] == [T0 + 3.5 * H]
    assert [v.version for v in history.target_versions] == ["t2"]
    assert store.history(T0, T0 + 60 * 86400).bucket_seconds == 86400


def test_history_buckets_follow_the_span_and_mark_draft_changes(store):
    # A three-minute run: 10-second buckets from the windows, so a drop inside a minute shows.
    records = [step("logs", 4, 4, T0 + s) for s in range(0, 60, 2)]
    records += [step("logs", 4, 1, T0 + s, draft="d2") for s in range(60, 180, 2)]
    store.write_records(records)
    store.flush(T0 + 400)
    store.rollup(T0 + 400)
    history = store.history(T0, T0 + 180)
    assert history.bucket_seconds == 10 and len(history.acceptance["logs"]) == 18
    assert [p.acceptance for p in history.acceptance["logs"]][5:7] == [1.0, 0.25]
    assert [v.version for v in history.draft_versions] == ["d2"]
    assert store.history(T0, T0 + 3 * H).bucket_seconds == 60
    assert store.history(T0, T0 + 24 * H).bucket_seconds == 300
    assert store.history(T0, T0 + 7 * 86400).bucket_seconds == 3600
