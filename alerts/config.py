"""Configuration of the alert lifecycle and of delivery to sinks."""

from __future__ import annotations

from dataclasses import dataclass

from alerts.detectors.checks import check_at_least, check_count, check_positive


@dataclass(frozen=True)
class AlertConfig:
    """All durations in seconds.

    - ``pending_seconds``: how long an alert stays pending before it fires (Prometheus' ``for``; 0 fires
      at the next tick).
    - ``resend_seconds``: a firing alert is sent again this often (Alertmanager forgets silent senders).
    - ``rate_limit`` new notifications per alertname and domain per ``rate_interval_seconds``; an alert
      over the limit stays pending until the limit allows it (and never fires if resolved first). None:
      no limit.
    - ``resolve_timeout_seconds``: an event-like alert (see ``AlertType.auto_resolve``) resolves after this
      long without being fired again. None: only explicit resolves.
    - ``keep_resolved_seconds`` / ``max_resolved``: resolved alerts kept in memory for ``alerts()``.
    - ``queue_size``: distinct alerts each sink's queue holds (the newest state of an alert replaces the
      queued one, so a sink that is down loses nothing below this bound); ``max_batch``: alerts per send.
    - ``retry_initial_seconds`` doubling (``retry_multiplier``) up to ``retry_max_seconds``: back-off of a
      failing sink.
    """

    pending_seconds: float = 0.0
    resend_seconds: float = 60.0
    rate_limit: int | None = 5
    rate_interval_seconds: float = 3600.0
    resolve_timeout_seconds: float | None = 3600.0
    keep_resolved_seconds: float = 86400.0
    max_resolved: int = 1000
    queue_size: int = 1000
    max_batch: int = 100
    retry_initial_seconds: float = 1.0
    retry_max_seconds: float = 60.0
    retry_multiplier: float = 2.0

    def __post_init__(self) -> None:
        check_at_least("pending_seconds", self.pending_seconds, 0)
        check_positive("resend_seconds", self.resend_seconds)
        if self.rate_limit is not None and (type(self.rate_limit) is not int or self.rate_limit < 1):
            raise ValueError(f"rate_limit must be a whole number >= 1 or None, got {self.rate_limit!r}")
        check_positive("rate_interval_seconds", self.rate_interval_seconds)
        if self.resolve_timeout_seconds is not None:
            check_positive("resolve_timeout_seconds", self.resolve_timeout_seconds)
        check_at_least("keep_resolved_seconds", self.keep_resolved_seconds, 0)
        for name in ("max_resolved", "queue_size", "max_batch"):
            check_count(name, getattr(self, name))
        check_positive("retry_initial_seconds", self.retry_initial_seconds)
        check_positive("retry_max_seconds", self.retry_max_seconds)
        if self.retry_max_seconds < self.retry_initial_seconds:
            raise ValueError(f"retry_max_seconds ({self.retry_max_seconds}) must be >= retry_initial_seconds "
                             f"({self.retry_initial_seconds})")
        check_at_least("retry_multiplier", self.retry_multiplier, 1)

    def retry_delay(self, failures: int) -> float:
        """Seconds to wait after ``failures`` consecutive failures (1, 2, ...)."""
        exponent = min(failures - 1, 64)  # beyond that the cap holds anyway; avoids float overflow
        return min(self.retry_max_seconds, self.retry_initial_seconds * self.retry_multiplier ** exponent)

