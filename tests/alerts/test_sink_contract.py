"""Every sink: a name, a resend preference, send() of firing and resolved alerts delivered whole (each
alert's labels reach the receiver), and close()."""

import io
import json

import httpx
import pytest

from alerts.alert import Alert
from alerts.sinks import AlertmanagerSink, LogSink, Sink, WebhookSink

LABELS = {"alertname": "StaleDraft", "domain": "code", "severity": "critical", "pod": "p"}
BATCH = [Alert(LABELS, {"summary": "s"}, 100.0), Alert(dict(LABELS, domain="chat"), {}, 50.0, 120.0)]


def _log():
    stream = io.StringIO()
    return LogSink(stream), lambda: [json.loads(line)["labels"] for line in stream.getvalue().splitlines()]


def _http(cls, pick):
    bodies = []

    def answer(request):
        bodies.append(json.loads(request.content))
        return httpx.Response(200)

    sink = cls("http://receiver.invalid", transport=httpx.MockTransport(answer))
    return sink, lambda: [a["labels"] for body in bodies for a in pick(body)]


SINKS = {
    "log": _log,
    "webhook": lambda: _http(WebhookSink, lambda body: body["alerts"]),
    "alertmanager": lambda: _http(AlertmanagerSink, lambda body: body),
}


@pytest.mark.parametrize("kind", SINKS)
def test_sink_contract(kind):
    sink, received = SINKS[kind]()
    assert isinstance(sink, Sink) and sink.name == kind and isinstance(sink.resend, bool)
    sink.send(BATCH)
    sink.send([])
    assert received() == [a.labels for a in BATCH]
    sink.close()
