"""A generic webhook: the alerts as JSON, optionally with a Slack-compatible ``text`` field."""

from __future__ import annotations

from collections.abc import Sequence

import httpx

from alerts.alert import Alert
from alerts.sinks.http import HttpSink


class WebhookSink(HttpSink):
    """POSTs ``{"source": "specwatch", "status", "alerts": [Alert.to_dict(), ...]}`` (status is firing
    when any alert of the batch fires). ``text=True`` adds a ``text`` field with one line per alert, which
    Slack and Mattermost incoming webhooks show as the message."""

    name = "webhook"

    def __init__(self, url: str, *, text: bool = False, resend: bool = False, timeout: float = 5.0,
                 headers: dict[str, str] | None = None, transport: httpx.BaseTransport | None = None):
        super().__init__(url, timeout=timeout, headers=headers, transport=transport)
        self.text = text
        self.resend = resend

    def send(self, alerts: Sequence[Alert]) -> None:
        self.post(self.body(alerts))

    def body(self, alerts: Sequence[Alert]) -> dict:
        firing = any(a.state == "firing" for a in alerts)
        body = {"source": "specwatch", "status": "firing" if firing else "resolved",
                "alerts": [a.to_dict() for a in alerts]}
        if self.text:
            body["text"] = "\n".join(slack_line(a) for a in alerts)
        return body


def slack_line(alert: Alert) -> str:
    """``[FIRING] AcceptanceDrift code (warning, pod-1): summary``."""
    labels = alert.labels
    where = ", ".join(v for v in (labels.get("severity"), labels.get("pod")) if v)
    summary = alert.annotations.get("summary", "")
    return (f"[{alert.state.upper()}] {labels.get('alertname', '?')} {labels.get('domain', '')}"
            f"{f' ({where})' if where else ''}{f': {summary}' if summary else ''}")
