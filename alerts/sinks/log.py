"""Structured JSON lines, one per alert state sent: to a stream, or through ``logging``."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import TextIO

from alerts.alert import Alert
from alerts.sinks.base import Sink

LOGGER = logging.getLogger("specwatch.alerts")


class LogSink(Sink):
    """Writes ``{"event": "alert", "status", "labels", "annotations", "starts_at", "ends_at",
    "fingerprint"}`` per alert: to ``stream`` if given (flushed per batch), else to ``logger`` at WARNING
    for firing alerts and INFO for resolved ones. Re-sends are not logged unless ``resend``."""

    name = "log"

    def __init__(self, stream: TextIO | None = None, logger: logging.Logger | None = None,
                 resend: bool = False):
        self.stream = stream
        self.logger = logger or LOGGER
        self.resend = resend

    def send(self, alerts: Sequence[Alert]) -> None:
        lines = [(alert, json.dumps({"event": "alert", **alert.to_dict()}, sort_keys=True)) for alert in alerts]
        if self.stream is not None:
            self.stream.write("".join(line + "\n" for _, line in lines))
            self.stream.flush()
            return
        for alert, line in lines:
            self.logger.log(logging.WARNING if alert.state == "firing" else logging.INFO, line)
