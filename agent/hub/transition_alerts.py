"""The switch's transitions turned into alerts: SpeculationDisabled fires when a domain is switched off; when
it comes back on, the restoration resolves it (the resolved alert carries why, in ``restored``). A
restoration is the end of a problem, not a new one to page for: it used to fire SpeculationRestored, an
info alert that stayed firing until the resolve timeout."""

from __future__ import annotations

from collections import deque
from typing import Any

DISABLED, RESTORED = "SpeculationDisabled", "SpeculationRestored"


def alert_transitions(fresh: deque, alerts: Any) -> None:
    """Drain ``fresh`` ((time, policies.switch.Transition) items) into ``alerts`` (an AlertManager, or None:
    drained and dropped)."""
    while True:
        try:  # the flush and the alert job both drain this queue
            _, t = fresh.popleft()
        except IndexError:
            return
        if alerts is None:
            continue
        # The alert catalogue (alerts/alert.py) writes the summary and action.
        notes = {"reason": t.reason, "speculative_goodput": _rate(t.speculative_goodput),
                 "baseline_goodput": _rate(t.baseline_goodput)}
        if t.speculate:
            alerts.resolve(DISABLED, t.domain, {"restored": t.reason, "restored_speculative_goodput":
                                                notes["speculative_goodput"], "restored_baseline_goodput":
                                                notes["baseline_goodput"]})
        else:
            alerts.resolve(RESTORED, t.domain)  # one fired by an earlier version, if any
            alerts.fire(DISABLED, t.domain, None, notes)


def _rate(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.1f} tokens/s"
