"""The optional parts a Sidecar feeds, as the Sidecar uses them: the drift watch, the alert lifecycle and the
metrics. Any object with these methods fits (alerts.watch.DriftWatch, alerts.manager.AlertManager and
alerts.metrics.export.Metrics are the real ones; tests pass their own). None leaves that branch out."""

from __future__ import annotations

from typing import Any, Protocol

from specwatch_core.records import StepRecord


class Watch(Protocol):
    def observe(self, record: StepRecord) -> list[Any]:
        """Findings (drift, a stale draft) the record completes; [] for none."""

    def forget(self, domain: str) -> Any: ...

    def statistics(self) -> dict[tuple[str, str], float]:
        """(domain, detector) -> the detector's statistic, for the gauges."""


class Alerts(Protocol):
    def handle(self, finding: Any) -> None: ...

    def fire(self, alertname: str, domain: str, severity: str | None = None,
             annotations: dict[str, Any] | None = None) -> None: ...

    def resolve(self, alertname: str, domain: str, annotations: dict[str, Any] | None = None) -> None: ...

    def tick(self, now: float | None = None) -> None: ...

    def firing_counts(self) -> dict[str, int]: ...

    def close(self, timeout: float = 5.0) -> None: ...


class Metrics(Protocol):
    registry: Any

    def observe(self, record: StepRecord, domain: str | None = None) -> None: ...

    def set_decision(self, domain: str, lookahead: int, speculate: bool) -> None: ...

    def set_drift(self, domain: str, detector: str, value: float) -> None: ...

    def set_alerts_firing(self, counts: dict[str, int]) -> None: ...

    def labels(self) -> list[str]: ...

    def forget(self, domain: str) -> None: ...
