"""A policy behind the on/off switch: the policy picks K, the switch may turn it into K = 0 (or a probe)."""

from __future__ import annotations

from typing import Callable, Collection, Mapping, Sequence

from policies.base import ArmStats, Decision, Outcome, Policy, StopDrafting, StopState, has_refits
from policies.switch import Switch


class Switched(Policy):
    """``policy`` chooses the lookahead; ``switch`` turns speculation off per domain where it loses."""

    def __init__(self, policy: Policy, switch: Switch | None = None):
        super().__init__(policy.kmax, policy.seed)
        self.policy = policy
        self.switch = switch or Switch(seed=policy.seed)
        self.name = f"{policy.name}+switch"
        # Ours (in our name) by the policy's Decision (its id; the object is kept alive in the value):
        # policies hand back the same few objects between refits, so most steps need no new one.
        self._renamed: dict[int, tuple[Decision, Decision]] = {}

    @property
    def load_aware(self) -> bool:
        return self.policy.load_aware

    def choose(self, domain: str) -> Decision:
        return self._gated(domain, self.policy.choose(domain))

    def choose_at(self, domain: str, loads: Mapping[int, int], busy: Collection[int] | None = None) -> Decision:
        return self._gated(domain, self.policy.choose_at(domain, loads, busy))

    def _gated(self, domain: str, proposed: Decision) -> Decision:
        k, why = self.switch.gate(domain, proposed.lookahead, fallback=max(1, self.kmax // 2))
        if why:
            return Decision(k, k > 0, why, self.name)
        cached = self._renamed.get(id(proposed))
        if cached is not None and cached[0] is proposed:
            return cached[1]
        out = Decision(proposed.lookahead, proposed.speculate, proposed.reason, self.name)
        if len(self._renamed) >= 256:  # a few per domain are current; older ones are gone
            self._renamed.clear()
        self._renamed[id(proposed)] = (proposed, out)
        return out

    def update(self, domain: str, outcome: Outcome) -> "Switched":
        self.policy.update(domain, outcome)
        self.switch.update(domain, outcome)
        return self

    @property
    def has_refits(self) -> bool:
        """Whether the wrapped policy has fits to run off the hot path (the switch has none)."""
        return has_refits(self.policy)

    def prepare_refit(self) -> Callable[[], Callable[[], None]]:
        """The wrapped policy's (see ``ModelBased.prepare_refit``). A policy with only ``refit()`` runs it
        whole in the last phase (under the lock); one without fits, nothing."""
        prepare = getattr(self.policy, "prepare_refit", None)
        if callable(prepare):
            return prepare()
        refit = getattr(self.policy, "refit", None)
        return lambda: (refit if callable(refit) else _nothing)

    def refit(self) -> "Switched":
        self.prepare_refit()()()
        return self

    def warm_start(self, domain: str, history: Sequence[ArmStats], on: bool | None = None) -> "Switched":
        self.policy.warm_start(domain, history)
        self.switch.warm_start(domain, history, on)
        return self

    def prefer(self, arm: int | str | None) -> "Switched":
        self.policy.prefer(arm)
        return self

    def stop_drafting(self, domain: str) -> StopDrafting | None:
        return self.policy.stop_drafting(domain)

    def stop_state(self, domain: str) -> StopState | None:
        return self.policy.stop_state(domain)

    def reconsider(self) -> "Switched":
        self.policy.reconsider()
        self.switch.reconsider()
        return self

    def forget(self, domain: str) -> "Switched":
        self.policy.forget(domain)
        self.switch.forget(domain)
        return self

    def __repr__(self) -> str:
        return f"Switched({self.policy!r})"


def _nothing() -> None:
    return None
