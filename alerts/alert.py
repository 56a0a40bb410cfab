"""Alerts: what they carry, the catalogue of alert types, and the Alertmanager form.

Labels identify an alert (``alertname``, ``domain``, ``severity``, ``pod``) and deduplicate it; annotations
explain it (summary, versions, acceptance before/after, estimated speed-up lost, suggested action).
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from storage.events import StoredAlert

SEVERITIES = ("info", "warning", "critical")
LABELS = ("alertname", "domain", "severity", "pod")


@dataclass(frozen=True)
class Alert(StoredAlert):
    """An alert at one moment: ``ends_at`` is None while it fires and the resolve time once resolved.

    A ``StoredAlert`` as well, so the store saves it as it is."""

    def to_dict(self) -> dict[str, Any]:
        """Our wire form (unix seconds), used by the log and webhook sinks and GET /v1/alerts."""
        return {"status": self.state, "labels": dict(self.labels), "annotations": dict(self.annotations),
                "starts_at": self.starts_at, "ends_at": self.ends_at, "fingerprint": self.fingerprint}

    def to_alertmanager(self, generator_url: str | None = None, expires_at: float | None = None) -> dict:
        """The Alertmanager API v2 form. A firing alert carries ``expires_at`` as its endsAt when given
        (as Prometheus does, so alerts of a sender that died expire); a resolved one its resolve time."""
        body: dict[str, Any] = {"labels": dict(self.labels),
                                "annotations": {_annotation_name(k): v for k, v in self.annotations.items()},
                                "startsAt": rfc3339(self.starts_at)}
        ends_at = self.ends_at if self.ends_at is not None else expires_at
        if ends_at is not None:
            body["endsAt"] = rfc3339(max(ends_at, self.starts_at))
        if generator_url:
            body["generatorURL"] = generator_url
        return body

    @classmethod
    def of(cls, stored: StoredAlert) -> "Alert":
        return stored if isinstance(stored, cls) else cls(dict(stored.labels), dict(stored.annotations),
                                                          stored.starts_at, stored.ends_at)


@dataclass(frozen=True)
class AlertType:
    """Defaults for one alertname. ``auto_resolve``: the alert describes an event, so it resolves once
    nothing has fired it for the resolve timeout; otherwise something must resolve it (a condition the
    runtime tracks). Firing this type resolves the types in ``resolves`` for the same domain."""

    name: str
    severity: str
    summary: str  # str.format template over the annotations and {domain}; missing fields show as "?"
    action: str
    auto_resolve: bool = True
    resolves: tuple[str, ...] = ()


CATALOGUE: dict[str, AlertType] = {t.name: t for t in (
    AlertType("AcceptanceDrift", "warning",
              "Acceptance in {domain} moved from {acceptance_before} to {acceptance_after}",
              "Check whether the target model changed; refresh the draft if it did."),
    AlertType("StaleDraft", "critical",
              "Draft {draft_version} no longer matches target {target_version} in {domain}",
              "Re-distil the draft against the current target (specwatch models distill)."),
    AlertType("BelowBreakEven", "warning",
              "Speculation in {domain} is slower than plain decoding (acceptance {acceptance_after})",
              "Lower the lookahead or turn speculation off for this domain."),
    # Labels name the pod that departs from its peers; the sidecar of that pod fires it (alerts/fleet.py).
    AlertType("FleetOutlier", "warning",
              "Pod {pod} departs from its peers in {domain}: acceptance {pod_acceptance} vs {peers_acceptance}",
              "Compare the pod with a peer (node, draft image, engine flags); drain it or finish the rollout."),
    AlertType("SpeculationDisabled", "warning", "Speculation turned off in {domain}: {reason}",
              "Look at the drift alerts of this domain; refresh the draft.", auto_resolve=False),
    # No longer fired by the sidecar (a restoration resolves SpeculationDisabled); kept for stored history and
    # for callers of AlertManager.fire.
    AlertType("SpeculationRestored", "info", "Speculation turned back on in {domain}: {reason}",
              "None; watch acceptance in this domain for a while.", resolves=("SpeculationDisabled",)),
)}


def alert_type(alertname: str) -> AlertType | None:
    return CATALOGUE.get(alertname)


def describe(alertname: str, domain: str, annotations: dict[str, Any]) -> dict[str, str]:
    """Annotations as strings, with a summary and a suggested action from the catalogue if missing."""
    out = {str(k): str(v) for k, v in annotations.items()}
    kind = CATALOGUE.get(alertname)
    if kind is not None:
        if "summary" not in out:
            out["summary"] = string.Formatter().vformat(kind.summary, (), _Fields(out, domain=domain))
        out.setdefault("action", kind.action)
    return out


class _Fields(dict):
    def __init__(self, values: dict[str, str], **extra: str):
        super().__init__(values, **extra)

    def __missing__(self, key: str) -> str:
        return "?"


def rfc3339(ts: float) -> str:
    """RFC 3339 in UTC with milliseconds and a Z, as Alertmanager expects."""
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


_NOT_NAME = re.compile(r"[^a-zA-Z0-9_]")


def _annotation_name(name: str) -> str:
    # Alertmanager rejects the whole alert when an annotation name is not a valid label name.
    name = _NOT_NAME.sub("_", name)
    return name if name and not name[0].isdigit() else f"_{name}"
