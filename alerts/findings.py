"""Findings: what the drift watch concluded, with the annotations an alert carries.

Acceptance in annotations is per drafted position, counted up to and including the first rejection
(accepted / verified positions): the per-token acceptance a of Leviathan et al.'s formula, not vLLM's
accepted / drafted rate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

from policies.goodput import leviathan_speedup


@dataclass(frozen=True)
class Finding:
    """Something a detector concluded; the alert manager turns it into an alert."""

    alertname: str  # "AcceptanceDrift" | "StaleDraft" | "BelowBreakEven"
    domain: str
    severity: str  # "warning" | "critical"
    annotations: dict[str, str] = field(default_factory=dict)
    detector: str = ""
    resolves: bool = False  # the condition is over: resolve the domain's alert of this name instead


@dataclass(frozen=True, slots=True)
class Speed:
    """What the domain's speculative steps look like lately: mean lookahead and the cost ratio c."""

    lookahead: int
    cost_ratio: float | None  # draft seconds per drafted token / verify seconds per step; None: untimed


def iso(ts: float) -> str:
    """ISO 8601 in UTC, seconds."""
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="seconds")


def speedup_lost(before: float, after: float, k: int, c: float) -> float:
    """Leviathan et al.'s speed-up over plain decoding at acceptance ``before`` minus at ``after``, for
    lookahead ``k`` and draft/target cost ratio ``c`` (arXiv 2211.17192)."""
    return leviathan_speedup(before, k, c) - leviathan_speedup(after, k, c)


def speed_annotations(before: float, after: float, speed: Speed) -> dict[str, str]:
    """Estimated speed-ups before and after and the speed-up lost (absent when steps carry no timing)."""
    k, c = speed.lookahead, speed.cost_ratio
    if c is None or k < 1:
        return {"speedup_lost": "unknown (no timed speculative steps)"}
    return {"speedup_before": f"{leviathan_speedup(before, k, c):.2f}x",
            "speedup_after": f"{leviathan_speedup(after, k, c):.2f}x",
            "speedup_lost": f"{speedup_lost(before, after, k, c):.2f}x",
            "lookahead": str(k), "cost_ratio": f"{c:.3f}"}


def slower_than_plain(after: float, speed: Speed) -> bool:
    """True when Leviathan's formula puts speculation at ``after`` below plain decoding."""
    return speed.cost_ratio is not None and speed.lookahead >= 1 and \
        leviathan_speedup(after, speed.lookahead, speed.cost_ratio) < 1.0


def drift_finding(domain: str, detector: str, before: float, after: float, observations: int,
                  versions: tuple[str, str], speed: Speed) -> Finding:
    kind = "expected acceptance" if detector == "expected-cusum" else "acceptance"  # names joined by "+"
    notes = {
        "summary": f"{kind.capitalize()} in {domain} fell from {before:.2f} to {after:.2f}",
        "description": (f"{detector} confirmed a drop of {kind} per drafted position in {domain} from "
                        f"{before:.3f} to {after:.3f} (estimate over the last {observations} positions) with "
                        f"target {versions[0]} and draft {versions[1]} unchanged."),
        "acceptance_before": f"{before:.3f}", "acceptance_after": f"{after:.3f}",
        "target_version": versions[0], "draft_version": versions[1],
        **speed_annotations(before, after, speed),
        "action": ("Look for a change in the traffic of this domain or an unannounced model change; the "
                   "lookahead policy adapts K, the switch turns speculation off if it stops paying; if the "
                   "drop lasts, re-distil the draft (specwatch models distill)."),
    }
    return Finding("AcceptanceDrift", domain, "warning", notes, detector)


def stale_finding(domain: str, before: float, after: float, observations: int, old: tuple[str, str],
                  new: tuple[str, str], speed: Speed, since: float,
                  expected: tuple[float, float] | None = None) -> Finding:
    """``expected``: mean expected acceptance before and after when the test ran on it (else on flags)."""
    changed = "target" if old[0] != new[0] else "draft"
    test = "expected acceptance" if expected is not None else "accept flags"
    notes = {
        "summary": (f"Draft {new[1]} is stale for target {new[0]} in {domain}: acceptance "
                    f"{before:.2f} -> {after:.2f}"),
        "description": (f"After the {changed} version changed ({old[0]}/{old[1]} -> {new[0]}/{new[1]}, "
                        f"target/draft, at {iso(since)}), a sequential test on {test} confirmed a drop in "
                        f"{domain} after {observations} drafted positions: acceptance {before:.3f} before, "
                        f"{after:.3f} since."),
        "acceptance_before": f"{before:.3f}", "acceptance_after": f"{after:.3f}",
        **({"expected_acceptance_before": f"{expected[0]:.3f}", "expected_acceptance_after": f"{expected[1]:.3f}"}
           if expected is not None else {}),
        "changed_at": iso(since),
        "old_target_version": old[0], "new_target_version": new[0], "target_version": new[0],
        "draft_version": new[1], **({"old_draft_version": old[1]} if old[1] != new[1] else {}),
        **speed_annotations(before, after, speed),
        "action": (f"Turn speculation off for {domain} (the switch does so once goodput falls below plain "
                   f"decoding) and re-distil the draft against target {new[0]} (specwatch models distill)."),
    }
    severity = "critical" if slower_than_plain(after, speed) else "warning"
    return Finding("StaleDraft", domain, severity, notes, "stale-draft")


def breakeven_finding(domain: str, speculative: float, plain: float, acceptance: float | None,
                      lookahead: int) -> Finding:
    notes = {
        "summary": (f"Speculation in {domain} is slower than plain decoding: {speculative:.1f} vs "
                    f"{plain:.1f} tokens/s"),
        "description": (f"Measured goodput (tokens emitted per second of step time) of speculative steps "
                        f"(mean lookahead {lookahead}) is {speculative:.1f} tokens/s against {plain:.1f} for "
                        f"plain steps in {domain}, beyond measurement noise."),
        "speculative_goodput": f"{speculative:.1f}", "plain_goodput": f"{plain:.1f}",
        "acceptance_after": f"{acceptance:.3f}" if acceptance is not None else "unknown",
        "lookahead": str(lookahead),
        "action": (f"Turn speculation off for {domain} or lower its lookahead (the switch does so when it "
                   f"runs in this sidecar); if acceptance fell too, re-distil the draft."),
    }
    return Finding("BelowBreakEven", domain, "warning", notes, "breakeven")
