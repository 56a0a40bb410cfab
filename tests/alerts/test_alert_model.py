"""The Alert dataclass, the catalogue and the configuration's validation."""

import pytest

from alerts.alert import CATALOGUE, SEVERITIES, Alert, describe, rfc3339
from alerts.config import AlertConfig
from storage import StoredAlert

LABELS = {"alertname": "AcceptanceDrift", "domain": "code", "severity": "warning", "pod": "p"}


def test_alert_is_a_stored_alert_identified_by_its_labels():
    firing = Alert(LABELS, {"summary": "a"}, 100.0)
    resolved = Alert(dict(reversed(LABELS.items())), {"summary": "b"}, 100.0, 160.0)
    assert isinstance(firing, StoredAlert) and firing.fingerprint == resolved.fingerprint
    assert (firing.state, resolved.state) == ("firing", "resolved")
    assert Alert(dict(LABELS, domain="chat"), {}, 100.0).fingerprint != firing.fingerprint
    assert Alert.of(StoredAlert(LABELS, {}, 1.0, 2.0)) == Alert(LABELS, {}, 1.0, 2.0)
    assert resolved.to_dict() == {"status": "resolved", "labels": resolved.labels, "annotations": {"summary": "b"},
                                  "starts_at": 100.0, "ends_at": 160.0, "fingerprint": firing.fingerprint}


def test_alertmanager_form_is_rfc3339_utc():
    assert rfc3339(0.25) == "1970-01-01T00:00:00.250Z"
    body = Alert(LABELS, {}, 0.0).to_alertmanager()
    assert body == {"labels": LABELS, "annotations": {}, "startsAt": "1970-01-01T00:00:00.000Z"}
    # an end never precedes the start (Alertmanager refuses such an alert)
    assert Alert(LABELS, {}, 60.0, 30.0).to_alertmanager()["endsAt"] == "1970-01-01T00:01:00.000Z"
    assert Alert(LABELS, {}, 60.0, 90.0).to_alertmanager(expires_at=999)["endsAt"].startswith("1970-01-01T00:01:30")


def test_catalogue_is_complete_and_fills_summary_and_action():
    assert {"AcceptanceDrift", "StaleDraft", "SpeculationDisabled", "SpeculationRestored",
            "BelowBreakEven"} <= set(CATALOGUE)
    for kind in CATALOGUE.values():
        assert kind.severity in SEVERITIES and kind.summary and kind.action
        assert all(name in CATALOGUE for name in kind.resolves)
    out = describe("AcceptanceDrift", "code", {"acceptance_before": 0.71})
    assert out["summary"] == "Acceptance in code moved from 0.71 to ?" and out["acceptance_before"] == "0.71"
    assert describe("AcceptanceDrift", "code", {"summary": "mine", "action": "none"}) == {
        "summary": "mine", "action": "none"}
    assert describe("Custom", "code", {"x": 1}) == {"x": "1"}


@pytest.mark.parametrize("field,value,message", [
    ("pending_seconds", -1, "pending_seconds must be a finite number >= 0"),
    ("resend_seconds", 0, "resend_seconds must be a finite number > 0"),
    ("rate_limit", 0, "rate_limit must be a whole number >= 1 or None"),
    ("rate_limit", True, "rate_limit must be a whole number"),
    ("resolve_timeout_seconds", float("inf"), "resolve_timeout_seconds must be a finite number > 0"),
    ("queue_size", 0, "queue_size must be a whole number >= 1"),
    ("max_batch", 2.5, "max_batch must be a whole number >= 1"),
    ("retry_max_seconds", 0.5, r"retry_max_seconds \(0.5\) must be >= retry_initial_seconds \(1.0\)"),
    ("retry_multiplier", 0.5, "retry_multiplier must be a finite number >= 1"),
])
def test_config_validation_messages(field, value, message):
    with pytest.raises(ValueError, match=message):
        AlertConfig(**{field: value})


def test_config_defaults_and_optional_limits():
    config = AlertConfig()
    assert config.resend_seconds == 60 and config.pending_seconds == 0
    AlertConfig(rate_limit=None, resolve_timeout_seconds=None, pending_seconds=0)
