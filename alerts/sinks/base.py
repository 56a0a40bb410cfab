"""The sink interface: somewhere alerts are sent (a log, a webhook, Alertmanager)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from alerts.alert import Alert


class Sink(ABC):
    """Sends batches of alerts. ``send`` runs on the sink's own delivery thread and may block (with a
    timeout) or raise: the worker retries with back-off, except after a ``RejectedError``.

    ``resend``: whether the sink also wants the periodic re-sends of firing alerts (Alertmanager needs
    them to keep an alert active; a chat channel does not want one message a minute)."""

    name: str = "sink"
    resend: bool = True

    @abstractmethod
    def send(self, alerts: Sequence[Alert]) -> None:
        """Deliver every alert of the batch, or raise."""

    def close(self) -> None:
        """Release connections; called once, after the last send."""


class RejectedError(Exception):
    """The receiver refused the batch for what it is (a 4xx other than 408/429): sending it again would
    fail again, so the worker logs it and drops it instead of retrying."""
