"""Warm start: stored per-domain history turned into the policies' ArmStats, so a restarted sidecar does
not relearn from zero. Only history measured against the current target and draft counts: after a target
update the old acceptance is exactly what must not be trusted."""

from __future__ import annotations

import math
import time
from typing import Any

from policies.base import ArmStats
from storage import Store
from storage.query import StatsQuery

DEFAULT_LOOKBACK = 86_400.0  # a day of history: enough to rank arms, recent enough to trust


def arm_history(store: Store, target_version: str, draft_version: str | None = None,
                since: float | None = None, now: float | None = None) -> dict[str, list[ArmStats]]:
    """Per domain, one ArmStats per lookahead seen with ``target_version`` since ``since``.

    ``draft_version`` is matched through the stored version log: when the pod's draft changed after
    ``since``, history starts at that change.
    """
    now = time.time() if now is None else now
    since = pair_since(store, draft_version, since, now)
    totals = store.stats(StatsQuery(since, now, ("domain", "target_version", "lookahead"))).rows
    positions = store.stats(StatsQuery(since, now, ("domain", "target_version", "lookahead", "position"))).rows
    per_position: dict[tuple[str, int], dict[int, tuple[int, int]]] = {}
    for row in positions:
        if row["target_version"] == target_version:
            per_position.setdefault((row["domain"], row["lookahead"]), {})[row["position"]] = (
                row["reached"], row["accepted"])
    out: dict[str, list[ArmStats]] = {}
    for row in totals:
        if row["target_version"] != target_version or not row["steps"]:
            continue
        out.setdefault(row["domain"], []).append(_arm(row, per_position.get((row["domain"], row["lookahead"]), {})))
    return out


def pair_since(store: Store, draft_version: str | None, since: float | None, now: float) -> float:
    """Where history of ``draft_version`` starts: ``since`` (default a day back), or the draft's first
    sighting in the version log if later (stored rows carry no draft version)."""
    since = now - DEFAULT_LOOKBACK if since is None else since
    if draft_version is not None:
        changed = [v.first_seen for v in store.versions() if v.role == "draft" and v.version == draft_version]
        if changed:
            since = max(since, min(changed))
    return min(since, now - 1)


def switch_states(store: Store, domains: list[str] | None = None) -> dict[str, bool]:
    """The last stored on/off state per domain (domains never switched are absent: on by default)."""
    state: dict[str, bool] = {}
    for t in store.transitions():
        if domains is None or t.domain in domains:
            state[t.domain] = t.enabled
    return state


def _arm(row: dict[str, Any], positions: dict[int, tuple[int, int]]) -> ArmStats:
    steps = int(row["steps"])
    k = int(row["lookahead"])
    reached = tuple(positions.get(i, (0, 0))[0] for i in range(1, k + 1))
    accepted = tuple(positions.get(i, (0, 0))[1] for i in range(1, k + 1))
    return ArmStats(k, steps, round(row["tokens_per_step"] * steps),
                    (row["draft_seconds_per_step"] or 0.0) * steps,
                    (row["verify_seconds_per_step"] or 0.0) * steps, reached, accepted)


def latest_versions(store: Store, pod: str) -> tuple[str | None, str | None]:
    """(target, draft) versions ``pod`` stored most recently; None where it stored none."""
    latest: dict[str, tuple[float, str]] = {}
    for v in store.versions():
        if v.pod == pod and v.last_seen >= latest.get(v.role, (-math.inf, ""))[0]:
            latest[v.role] = (v.last_seen, v.version)
    return latest.get("target", (0, None))[1], latest.get("draft", (0, None))[1]
