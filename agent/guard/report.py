"""The guard's run: estimate each domain's acceptance against the new target (agent/guard/estimate.py),
set it beside the history under the current target (agent/guard/history.py), and judge it
(policies/rollout.py)."""

from __future__ import annotations

from dataclasses import dataclass

from agent.decoding.sampling import SamplingParams
from agent.guard.estimate import Estimate, estimate
from agent.guard.history import History
from policies.rollout import RolloutConfig, StepCost, Verdict, judge

DEFAULT_LOOKAHEAD = 4  # the K assumed served when neither the history nor --lookahead says


@dataclass(frozen=True)
class DomainReport:
    domain: str
    estimate: Estimate
    before: float | None
    current_lookahead: int
    verdict: Verdict
    was_off: bool = False  # below break-even already under the current target (its history, the same cost)

    @property
    def broken(self) -> bool:
        """The update puts this domain below break-even: it is below after, and was not before (a domain
        without history counts as broken: nothing says it was already below)."""
        return self.verdict.below_break_even and not self.was_off

    def row(self) -> dict:
        v = self.verdict
        return {"domain": self.domain, "prompts": self.estimate.prompts, "positions": self.estimate.positions,
                "before": self.before, "after": self.estimate.acceptance, "drop": v.drop,
                "K now": self.current_lookahead, "K": v.lookahead, "tok/s ratio": v.speedup,
                "break-even": v.break_even,
                "action": v.action + (" (already below break-even)" if v.below_break_even and self.was_off else "")}


@dataclass(frozen=True)
class GuardReport:
    target_version: str
    draft_version: str
    history: History
    cost: StepCost
    cost_source: str  # "history", "flag" or "measured"
    temperature: float
    new_tokens: int
    domains: tuple[DomainReport, ...]

    @property
    def failed(self) -> list[str]:
        """Domains the update would put below break-even (the gate fails on any). A domain already below
        break-even under the current target is not among them: the update does not break it, and gating every
        rollout on a domain where speculation does not pay anyway would block them all."""
        return [d.domain for d in self.domains if d.broken]

    @property
    def already_off(self) -> list[str]:
        """Domains below break-even after the update that already were before it (reported, not gated)."""
        return [d.domain for d in self.domains if d.verdict.below_break_even and d.was_off]

    def gate(self, strict: bool = False) -> list[str]:
        """Domains that fail the rollout gate: those the update puts below break-even and, ``strict``, those
        to re-distill first."""
        return self.failed + ([d.domain for d in self.domains if d.verdict.verdict == "redistill"] if strict else [])

    def gate_message(self, gate: list[str]) -> str:
        """The line that says which domains failed ``gate`` and why."""
        failed = ", ".join(f"{d.domain} ({d.verdict.action})" for d in self.domains if d.domain in gate)
        return f"gate failed: {failed}"

    @property
    def title(self) -> str:
        """The versions compared and the step cost's ratio c and source, over the report's table."""
        return (f"draft {self.draft_version} against target {self.target_version} (now "
                f"{self.history.target_version or '?'}); c {self.cost.ratio:.2f} ({self.cost_source})")

    def rows(self) -> list[dict]:
        return [d.row() for d in self.domains]

    def to_dict(self) -> dict:
        h = self.history
        return {"target_version": self.target_version, "draft_version": self.draft_version,
                "current_target_version": h.target_version, "history_note": h.note,
                "cost_ratio": self.cost.ratio, "cost_source": self.cost_source,
                "verify_ratio": [v / self.cost.verify[0] for v in self.cost.verify],
                "temperature": self.temperature, "new_tokens": self.new_tokens, "failed": self.failed,
                "already_off": self.already_off,
                "domains": [{**d.row(), "verdict": d.verdict.verdict, "best_lookahead": d.verdict.best_lookahead,
                             "overlap": d.estimate.overlap / d.estimate.positions if d.estimate.positions else None,
                             "history_positions": h.domains[d.domain].reached if d.domain in h.domains else 0}
                            for d in self.domains]}


def guard(target, draft, prompts: dict[str, list[list[int]]], history: History, cost: StepCost, *,
          versions: tuple[str, str], cost_source: str, lookahead: int | None = None,
          params: SamplingParams | None = None, new_tokens: int = 64, batch_size: int = 64, seed: int = 0,
          config: RolloutConfig | None = None, pad_id: int = 0) -> GuardReport:
    """Per domain of ``prompts``: expected acceptance against ``target``, the history's, and the verdict.
    ``lookahead``: the K served now in every domain (default: each domain's from the history, else 4)."""
    params = params or SamplingParams()
    config = config or RolloutConfig()
    found = estimate(target, draft, prompts, new_tokens=new_tokens, params=params, batch_size=batch_size,
                     seed=seed, pad_id=pad_id)
    reports = []
    for domain in sorted(found):
        past = history.domains.get(domain)
        current = lookahead if lookahead is not None else past.lookahead if past else DEFAULT_LOOKAHEAD
        before = past.acceptance if past else None
        verdict = judge(found[domain].acceptance, cost, current, before, config)
        was_off = before is not None and judge(before, cost, current, None, config).below_break_even
        reports.append(DomainReport(domain, found[domain], before, current, verdict, was_off))
    return GuardReport(versions[0], versions[1], history, cost, cost_source, params.temperature, new_tokens,
                       tuple(reports))
