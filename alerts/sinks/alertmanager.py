"""Prometheus Alertmanager, API v2: POST /api/v2/alerts with a JSON array of alerts."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import httpx

from alerts.alert import Alert
from alerts.sinks.http import HttpSink


class AlertmanagerSink(HttpSink):
    """Sends to ``{url}/api/v2/alerts``. Alertmanager deduplicates by labels, groups and notifies; it
    needs firing alerts re-sent (the manager does, every ``resend_seconds``). A firing alert is sent with
    endsAt ``expiry_seconds`` ahead, so if specwatch dies its alerts expire rather than fire forever:
    keep ``expiry_seconds`` well above the re-send interval (Prometheus uses four times)."""

    name = "alertmanager"
    resend = True

    def __init__(self, url: str, *, generator_url: str | None = None, expiry_seconds: float = 240.0,
                 timeout: float = 5.0, headers: dict[str, str] | None = None,
                 transport: httpx.BaseTransport | None = None, clock: Callable[[], float] = time.time):
        if expiry_seconds <= 0:
            raise ValueError(f"expiry_seconds must be > 0, got {expiry_seconds!r}")
        super().__init__(url.rstrip("/") + "/api/v2/alerts", timeout=timeout, headers=headers,
                         transport=transport)
        self.generator_url = generator_url
        self.expiry_seconds = expiry_seconds
        self._clock = clock

    def send(self, alerts: Sequence[Alert]) -> None:
        expires = self._clock() + self.expiry_seconds
        self.post([a.to_alertmanager(self.generator_url, expires) for a in alerts])
