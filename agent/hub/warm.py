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
                since: float | None = None, now: float | None = None,
                domain: str | None = None) -> dict[str, list[ArmStats]]:
    """Per domain (only ``domain`` when given), one ArmStats per lookahead seen with ``target_version`` (and
    ``draft_version`` when given: the same pair) since ``since``, summed over every pod that stored it: a
    restarted or new pod starts from what its peers measured on the same pair.

    ``draft_version`` is also matched through the stored version log: when the draft first showed up after
    ``since``, history starts there.
    """
    now = time.time() if now is None else now
    since = pair_since(store, draft_version, since, now)
    dims = ("domain", "target_version", "draft_version", "lookahead")
    totals = store.stats(StatsQuery(since, now, dims, domain)).rows
    positions = store.stats(StatsQuery(since, now, (*dims, "position"), domain)).rows

    def same_pair(row: dict[str, Any]) -> bool:
        return row["target_version"] == target_version and draft_version in (None, row["draft_version"])

    per_position: dict[tuple[str, int], dict[int, tuple[int, int]]] = {}
    for row in filter(same_pair, positions):
        reached, accepted = per_position.setdefault((row["domain"], row["lookahead"]), {}).get(row["position"], (0, 0))
        per_position[row["domain"], row["lookahead"]][row["position"]] = (reached + row["reached"],
                                                                          accepted + row["accepted"])
    merged: dict[tuple[str, int], dict[str, Any]] = {}
    for row in filter(same_pair, totals):
        if row["steps"]:
            key = (row["domain"], row["lookahead"])
            merged[key] = _merge(merged[key], row) if key in merged else row
    out: dict[str, list[ArmStats]] = {}
    for (name, k), row in sorted(merged.items()):
        out.setdefault(name, []).append(_arm(row, per_position.get((name, k), {})))
    return out


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two stats rows of one domain and lookahead (several drafts when none was asked for) as one: per-step
    measures weighted by steps."""
    steps = a["steps"] + b["steps"]
    out = {**a, "steps": steps, "drafted": (a.get("drafted") or 0) + (b.get("drafted") or 0)}
    for name in ("tokens_per_step", "draft_seconds_per_step", "verify_seconds_per_step"):
        out[name] = ((a[name] or 0.0) * a["steps"] + (b[name] or 0.0) * b["steps"]) / steps
    return out


def pair_since(store: Store, draft_version: str | None, since: float | None, now: float) -> float:
    """Where history of ``draft_version`` starts: ``since`` (default a day back), or the draft's first
    sighting in the version log (any pod's) if later."""
    since = now - DEFAULT_LOOKBACK if since is None else since
    if draft_version is not None:
        changed = [v.first_seen for v in store.versions() if v.role == "draft" and v.version == draft_version]
        if changed:
            since = max(since, min(changed))
    return min(since, now - 1)


def switch_states(store: Store, domains: list[str] | None = None,
                  before: dict[str, float] | None = None) -> dict[str, bool]:
    """The last stored on/off state per domain (domains never switched are absent: on by default);
    ``before``: per domain, only transitions stored before that time count."""
    state: dict[str, bool] = {}
    for t in store.transitions():
        if (domains is None or t.domain in domains) and (before is None or t.ts < before.get(t.domain, math.inf)):
            state[t.domain] = t.enabled
    return state


def _arm(row: dict[str, Any], positions: dict[int, tuple[int, int]]) -> ArmStats:
    steps = int(row["steps"])
    k = int(row["lookahead"])
    reached = tuple(positions.get(i, (0, 0))[0] for i in range(1, k + 1))
    accepted = tuple(positions.get(i, (0, 0))[1] for i in range(1, k + 1))
    drafted = row.get("drafted")
    return ArmStats(k, steps, round(row["tokens_per_step"] * steps),
                    (row["draft_seconds_per_step"] or 0.0) * steps,
                    (row["verify_seconds_per_step"] or 0.0) * steps, reached, accepted,
                    None if drafted is None else int(drafted))


def latest_versions(store: Store, pod: str) -> tuple[str | None, str | None]:
    """(target, draft) versions ``pod`` stored most recently; None where it stored none."""
    latest: dict[str, tuple[float, str]] = {}
    for v in store.versions():
        if v.pod == pod and v.last_seen >= latest.get(v.role, (-math.inf, ""))[0]:
            latest[v.role] = (v.last_seen, v.version)
    return latest.get("target", (0, None))[1], latest.get("draft", (0, None))[1]


RETURN_MARGIN = 120.0  # seconds: a returning domain's history ends this long before its return, so its first
# records after the return (fed live, and bucketed by the minute in storage) are not counted twice


def returning_history(store: Store, pod: str, admitted: list[tuple[str, float]],
                      lookback: float = DEFAULT_LOOKBACK,
                      switch: bool = False) -> dict[str, tuple[list[ArmStats], bool | None]]:
    """For domains given a slot at the given times (a domain evicted while idle that came back): their
    stored arms with ``pod``'s latest versions, up to RETURN_MARGIN before the return, and (``switch``) their
    last stored on/off state. Domains with neither (new ones) are absent."""
    if not admitted:
        return {}
    target, draft = latest_versions(store, pod)
    # Only what the domain's earlier life stored: once admitted, its own transitions are live state (the
    # last stored one may be older than the switch's current state, whose transition is not flushed yet:
    # taking it turned logs off silently right after it came back on, and on again a second later).
    states = switch_states(store, [d for d, _ in admitted], before=dict(admitted)) if switch else {}
    out: dict[str, tuple[list[ArmStats], bool | None]] = {}
    for domain, at in admitted:
        until = at - RETURN_MARGIN
        arms = arm_history(store, target, draft, since=until - lookback, now=until,
                           domain=domain).get(domain, []) if target else []
        state = states.get(domain)
        if arms or state is not None:
            out[domain] = (arms, state)
    return out


def stored_history(store: Store, pod: str, now: float, lookback: float = DEFAULT_LOOKBACK, switch: bool = False,
                   target_version: str | None = None,
                   draft_version: str | None = None) -> dict[str, tuple[list[ArmStats], bool | None]]:
    """Per domain with any: stored arms of ``target_version`` (default: the latest ``pod`` stored) over
    ``lookback`` seconds before ``now``, and (``switch``) the last stored on/off state."""
    if target_version is None:
        target_version, draft_version = latest_versions(store, pod)
    history = arm_history(store, target_version, draft_version, since=now - lookback,
                          now=now) if target_version else {}
    states = switch_states(store) if switch else {}
    return {d: (history.get(d, []), states.get(d)) for d in set(history) | set(states)}
