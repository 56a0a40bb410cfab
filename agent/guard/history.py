"""What the store says about the current target and draft: per-domain acceptance, the K served, step costs.

Per-token acceptance before = accepted / reached over every drafted position (positions count up to and
including each step's first rejection), the quantity agent/guard/estimate.py predicts. History counts only
rows of the current target version since the draft was first seen (agent/hub/warm.py); a draft the version log
has never seen has no history.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.hub.warm import arm_history
from policies.base import ArmStats
from policies.goodput import backed_out_acceptance
from policies.rollout import StepCost, fitted_verify
from specwatch_core import settings
from storage import Store, StoreError


@dataclass(frozen=True)
class Before:
    acceptance: float | None  # None: no drafted position stored
    reached: int  # drafted positions counted
    lookahead: int  # the K served: drafted tokens per speculative step, rounded (0: speculation was off)
    steps: int


@dataclass(frozen=True)
class History:
    target_version: str | None
    draft_version: str
    domains: dict[str, Before]
    cost: StepCost | None  # measured, over every domain; None without timed speculative steps
    note: str = ""


def stored_history(db: str | None, draft_version: str, target_version: str | None, since: float, now: float,
                   kmax: int) -> History:
    """``current_history`` from the store at ``db``; without ``db`` (the default database) a missing database
    is no history, not an error."""
    try:
        store = Store.open(db or settings.db_url(), migrate_schema=False)
    except StoreError as exc:
        if db is not None:
            raise
        return History(target_version, draft_version, {}, None, f"no history: {exc}")
    try:
        return current_history(store, draft_version, target_version, since, now, kmax)
    finally:
        store.close(flush=False)


def current_history(store: Store, draft_version: str, target_version: str | None, since: float, now: float,
                    kmax: int) -> History:
    """History of ``draft_version`` under ``target_version`` (default: the target seen last) in [since, now)."""
    seen = store.versions()
    if target_version is None:
        targets = sorted((v for v in seen if v.role == "target"), key=lambda v: v.last_seen)
        if not targets:
            return History(None, draft_version, {}, None, "no history stored")
        target_version = targets[-1].version
    if not any(v.role == "draft" and v.version == draft_version for v in seen):
        return History(target_version, draft_version, {}, None,
                       f"draft {draft_version} never seen in the store: no history to compare with")
    arms = arm_history(store, target_version, draft_version, since=since, now=now)
    domains = {d: _before(a) for d, a in arms.items()}
    note = "" if domains else f"no steps of target {target_version} with draft {draft_version} in the range"
    return History(target_version, draft_version, domains, step_cost([a for v in arms.values() for a in v], kmax),
                   note)


def step_cost(arms: list[ArmStats], kmax: int) -> StepCost | None:
    """Seconds per drafted token and per verify pass (a line in K) over ``arms``; None when nothing was timed."""
    drafted = sum(a.steps * a.lookahead for a in arms if a.lookahead > 0)
    draft_seconds = sum(a.draft_seconds for a in arms if a.lookahead > 0)
    points = [(a.lookahead, a.verify_seconds / a.steps, a.steps) for a in arms if a.steps and a.verify_seconds > 0]
    if not drafted or not points:
        return None
    return StepCost(draft_seconds / drafted, fitted_verify(points, kmax))


def _before(arms: list[ArmStats]) -> Before:
    """Per-position counts where stored; else (aggregate records) the constant acceptance that explains the
    accepted tokens per step at each K (``backed_out_acceptance``)."""
    reached = sum(sum(a.reached) for a in arms)
    if reached:
        acceptance = sum(sum(a.accepted) for a in arms) / reached
    else:
        acceptance = backed_out_acceptance([a.steps for a in arms], [a.emitted - a.steps for a in arms],
                                           [a.lookahead for a in arms])
    speculative = [a for a in arms if a.lookahead > 0]
    steps = sum(a.steps for a in speculative)
    served = round(sum(a.steps * a.lookahead for a in speculative) / steps) if steps else 0
    return Before(acceptance, reached, served, sum(a.steps for a in arms))
