"""A policy behind the on/off switch: the policy picks K, the switch may turn it into K = 0 (or a probe)."""

from __future__ import annotations

from typing import Sequence

from policies.base import ArmStats, Decision, Outcome, Policy, StopDrafting
from policies.switch import Switch


class Switched(Policy):
    """``policy`` chooses the lookahead; ``switch`` turns speculation off per domain where it loses."""

    def __init__(self, policy: Policy, switch: Switch | None = None):
        super().__init__(policy.kmax, policy.seed)
        self.policy = policy
        self.switch = switch or Switch(seed=policy.seed)
        self.name = f"{policy.name}+switch"

    def choose(self, domain: str) -> Decision:
        proposed = self.policy.choose(domain)
        k, why = self.switch.gate(domain, proposed.lookahead, fallback=max(1, self.kmax // 2))
        if not why:
            return Decision(proposed.lookahead, proposed.speculate, proposed.reason, self.name)
        return Decision(k, k > 0, why, self.name)

    def update(self, domain: str, outcome: Outcome) -> "Switched":
        self.policy.update(domain, outcome)
        self.switch.update(domain, outcome)
        return self

    def warm_start(self, domain: str, history: Sequence[ArmStats], on: bool | None = None) -> "Switched":
        self.policy.warm_start(domain, history)
        self.switch.warm_start(domain, history, on)
        return self

    def stop_drafting(self, domain: str) -> StopDrafting | None:
        return self.policy.stop_drafting(domain)

    def __repr__(self) -> str:
        return f"Switched({self.policy!r})"
