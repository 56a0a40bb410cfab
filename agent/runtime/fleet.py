"""The fleet job's wiring: run the fleet check on the shared history and raise (or resolve) this pod's
FleetOutlier alerts. Every sidecar of the fleet runs it; each speaks only for its own pod."""

from __future__ import annotations

import time
from typing import Any


def check_fleet(sidecar: Any, check: Any, now: float | None = None) -> int:
    """Fire this pod's findings of ``check`` (an alerts.fleet.FleetCheck) and resolve the domains where it
    is back in line; returns the findings fired."""
    if sidecar.alerts is None:
        return 0
    report = check.run(sidecar.store, time.time() if now is None else now)
    findings, cleared = report.for_pod(sidecar.pod)
    for finding in findings:
        sidecar.alerts.handle(finding)
    for domain in cleared:
        sidecar.alerts.resolve("FleetOutlier", domain, {"resolved_by": "back in line with its peers"})
    return len(findings)
