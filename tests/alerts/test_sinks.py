"""Sinks: JSON log lines, the webhook against a real local HTTP receiver (also one that is down for a
while), which HTTP failures are retried, and the Alertmanager body."""

import io
import json
import logging

import httpx
import pytest

from alerts.alert import Alert
from alerts.config import AlertConfig
from alerts.manager import AlertManager
from alerts.sinks import AlertmanagerSink, LogSink, RejectedError, WebhookSink
from alert_fakes import T0, Clock, Receiver, free_port

LABELS = {"alertname": "AcceptanceDrift", "domain": "code", "severity": "warning", "pod": "pod-1"}
FIRING = Alert(LABELS, {"summary": "acceptance 0.71 -> 0.35", "acceptance_before": "0.71"}, T0)
RESOLVED = Alert(LABELS, FIRING.annotations, T0, T0 + 90)
FAST = AlertConfig(retry_initial_seconds=0.01, retry_max_seconds=0.05)


def test_log_sink_writes_one_json_line_per_alert():
    stream = io.StringIO()
    LogSink(stream).send([FIRING, RESOLVED])
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(line["event"], line["status"], line["ends_at"]) for line in lines] == [
        ("alert", "firing", None), ("alert", "resolved", T0 + 90)]
    assert lines[0]["labels"] == LABELS and lines[0]["starts_at"] == T0
    assert lines[0]["fingerprint"] == FIRING.fingerprint == RESOLVED.fingerprint


def test_log_sink_through_logging(caplog):
    with caplog.at_level(logging.INFO, logger="specwatch.alerts"):
        LogSink().send([FIRING, RESOLVED])
    assert [r.levelno for r in caplog.records] == [logging.WARNING, logging.INFO]
    assert json.loads(caplog.records[1].getMessage())["status"] == "resolved"


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.stop()


def test_webhook_posts_json_with_slack_text_to_a_real_receiver(receiver):
    sink = WebhookSink(receiver.url, text=True, headers={"Authorization": "Bearer t"})
    sink.send([FIRING, RESOLVED])
    sink.close()
    [body] = receiver.bodies
    assert receiver.paths == ["/hook"] and body["source"] == "specwatch" and body["status"] == "firing"
    assert [a["status"] for a in body["alerts"]] == ["firing", "resolved"]
    assert body["alerts"][0]["labels"] == LABELS and body["alerts"][1]["ends_at"] == T0 + 90
    assert body["text"].splitlines() == [
        "[FIRING] AcceptanceDrift code (warning, pod-1): acceptance 0.71 -> 0.35",
        "[RESOLVED] AcceptanceDrift code (warning, pod-1): acceptance 0.71 -> 0.35"]
    assert "text" not in WebhookSink(receiver.url).body([FIRING])


def test_webhook_receiver_down_for_a_while_then_up_gets_everything():
    port = free_port()
    clock = Clock(T0)
    sink = WebhookSink(f"http://127.0.0.1:{port}/hook", timeout=2)
    manager = AlertManager([sink], pod="pod-1", config=FAST, clock=clock)
    receiver = None
    try:
        manager.fire("AcceptanceDrift", "code", annotations={"acceptance_before": "0.7"})
        manager.fire("StaleDraft", "chat")
        manager.tick()
        delivery = manager.deliveries[0]
        while delivery.stats.failures < 3:  # connection refused, retried with back-off
            delivery.wait_idle(0.01)
        clock.now = T0 + 30
        manager.resolve("AcceptanceDrift", "code")
        manager.tick()
        receiver = Receiver(port)
        assert manager.flush(timeout=10)
    finally:
        manager.close(timeout=5)
        if receiver:
            receiver.stop()
    got = [(a["labels"]["alertname"], a["status"]) for body in receiver.bodies for a in body["alerts"]]
    # the firing state of AcceptanceDrift was overtaken by its resolution while the receiver was down
    assert sorted(got) == [("AcceptanceDrift", "resolved"), ("StaleDraft", "firing")]
    assert delivery.stats.delivered == 2 and delivery.stats.failures >= 3


def status_sink(status: int, seen: list) -> WebhookSink:
    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status, text="nope")

    return WebhookSink("http://hook.invalid/x", transport=httpx.MockTransport(answer))


@pytest.mark.parametrize("status,error", [(500, httpx.HTTPStatusError), (503, httpx.HTTPStatusError),
                                          (429, httpx.HTTPStatusError), (400, RejectedError),
                                          (404, RejectedError)])
def test_http_errors_retry_unless_the_request_itself_is_refused(status, error):
    seen = []
    with pytest.raises(error, match=str(status)):
        status_sink(status, seen).send([FIRING])
    assert len(seen) == 1
    status_sink(202, seen).send([FIRING])  # a 2xx is a delivery


def test_alertmanager_body():
    seen = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200)

    sink = AlertmanagerSink("http://am.invalid:9093/", generator_url="http://pod-1:8790/v1/alerts",
                            expiry_seconds=240, clock=lambda: T0 + 10, transport=httpx.MockTransport(answer))
    odd = Alert(LABELS, {"speed-up lost": "12%", "1st": "x"}, T0)
    sink.send([FIRING, RESOLVED, odd])
    [request] = seen
    assert request.url.path == "/api/v2/alerts" and request.method == "POST"
    firing, resolved, renamed = json.loads(request.content)
    assert firing == {"labels": LABELS, "annotations": FIRING.annotations,
                      "startsAt": "2023-11-14T22:13:20.000Z", "endsAt": "2023-11-14T22:17:30.000Z",
                      "generatorURL": "http://pod-1:8790/v1/alerts"}
    assert resolved["endsAt"] == "2023-11-14T22:14:50.000Z"
    assert renamed["annotations"] == {"speed_up_lost": "12%", "_1st": "x"}  # valid annotation names


def test_bad_urls_are_refused_at_construction():
    with pytest.raises(ValueError, match="must start with http"):
        WebhookSink("hooks.example.com/x")
    with pytest.raises(ValueError, match="expiry_seconds"):
        AlertmanagerSink("http://am:9093", expiry_seconds=0)
