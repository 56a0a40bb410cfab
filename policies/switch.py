"""The speculation on/off switch, per domain, with hysteresis, probes and a watch after re-enabling.

Speculation goes off for a domain when the goodput of its recent speculative steps (whatever K the policy
ran) stays below K = 0's by ``margin_off`` for ``dwell`` of that domain's steps, or when the policy itself has
stopped speculating; it comes back on when probes (run at the best speculative arm) show speculation above
K = 0 by ``margin_on`` for ``dwell`` steps and the policy underneath would speculate (it proposed K > 0 on at
least half of its recent steps: a policy that itself runs K = 0 would turn it straight off again, so its
no holds the switch off while the probes go on measuring). Differences count only beyond ``confidence``
standard errors. Time is counted in the domain's steps, not seconds, so a sidecar at 10 steps/s and one at
10k steps/s react alike. While off, a ``probe_fraction`` of steps still speculate so recovery is found; while
on, K = 0 is measured now and then if the policy never runs it (``baseline_fraction`` of steps while its
estimate is thin). After re-enabling, acceptance is watched for ``watch_steps``: if it collapses below
``collapse_ratio`` of what the probes saw (a stale drafter state, as reported for TensorRT-LLM's
SpeculationGate), speculation goes off again at once.

The states themselves (on, watched after re-enabling, off and probing) are in ``policies.switch_states``.
"""

from __future__ import annotations

from typing import Callable, Sequence

from policies.base import ArmStats, Outcome
from policies.estimates import DecayingSums
from policies.switch_config import SwitchConfig, Transition
from policies.switch_states import DomainState, Off, On, State, Watching, best_arm, estimate, speculative_goodput


class Switch:
    """Per-domain on/off state. ``gate`` filters a policy's lookahead; ``update`` learns from each step."""

    def __init__(self, config: SwitchConfig | None = None, seed: int | None = None):
        import random

        self.config = config or SwitchConfig()
        self._rng = random.Random(seed)
        self._domains: dict[str, DomainState] = {}
        self._listeners: list[Callable[[Transition], None]] = []
        self._wants_fade = 0.5 ** (1.0 / self.config.dwell)

    # -- queries --------------------------------------------------------------------------------
    def is_on(self, domain: str) -> bool:
        return self._state(domain).on

    def reason(self, domain: str) -> str:
        return self._state(domain).last_reason

    def transitions(self, domain: str) -> list[Transition]:
        return list(self._state(domain).history)

    def goodputs(self, domain: str) -> tuple[float | None, float | None]:
        """(best speculative arm's goodput, K = 0's goodput); None where not yet measured."""
        s = self._state(domain)
        return speculative_goodput(s, self.config), estimate(s, 0, self.config)

    def reconsider(self) -> "Switch":
        """A model version changed (a re-distilled draft, a new target): what probes measured before says
        nothing about the new pair. Every domain that is off forgets its probes and probes at
        ``investigate_fraction`` for ``reconsider_steps`` of its steps, so a recovery is found in dozens of
        steps rather than hundreds."""
        for s in self._domains.values():
            if not s.on:
                s.probes = s.probe_acceptance = s.probe_depth = None
                s.reconsider_left = self.config.reconsider_steps
        return self

    def forget(self, domain: str) -> "Switch":
        """Drop ``domain``'s state (evicted while idle): a return starts on, or from a warm start."""
        self._domains.pop(domain, None)
        return self

    def subscribe(self, listener: Callable[[Transition], None]) -> "Switch":
        """Call ``listener(transition)`` on every transition (storage, alerts)."""
        self._listeners.append(listener)
        return self

    # -- the decision path ----------------------------------------------------------------------
    def gate(self, domain: str, proposed: int, fallback: int = 1) -> tuple[int, str]:
        """The lookahead to run given the policy's ``proposed`` one, and why.

        ``fallback`` is the K a probe uses when the policy proposes 0 and no speculative arm is known.
        """
        s = self._domains.get(domain) or self._state(domain)
        f = self._wants_fade
        s.wants = s.wants * f + (1.0 - f if proposed > 0 else 0.0)
        return s.state.gate(s, proposed, fallback, self.config, self._rng)

    def update(self, domain: str, outcome: Outcome) -> "Switch":
        s = self._domains.get(domain) or self._state(domain)
        cfg = self.config
        s.record(outcome, cfg)
        state = s.state.update(s, outcome, cfg)
        if state is s.state:
            return self
        if state.on == s.state.on:  # a watch that ended quietly
            s.state = state
            return self
        return self._enter(domain, s, state)

    # -- warm start -----------------------------------------------------------------------------
    def warm_start(self, domain: str, history: Sequence[ArmStats], on: bool | None = None) -> "Switch":
        """Seed estimates from stored totals (capped to a few halflives) and the last stored state."""
        s = self._state(domain)
        if on is not None:
            reason = "restored from history: " + ("on" if on else "off")
            # Back on: still watched if a watch was under way (cut short only by a restored "off").
            s.state = (Watching if s.watch_left else On)(reason) if on else Off(reason)
        usable = [h for h in history if h.steps > 0 and h.draft_seconds + h.verify_seconds > 0]
        for h in usable:
            halflife = self.config.baseline_halflife if h.lookahead == 0 else self.config.halflife
            s.arms.setdefault(h.lookahead, DecayingSums(halflife)).seed(
                s.step, h.steps, h.emitted, h.draft_seconds + h.verify_seconds)
        best = best_arm(s, self.config)
        for h in usable:
            if h.lookahead == best:  # speculation as the best stored arm gave it
                sums = DecayingSums(self.config.halflife)
                sums.seed(s.step, h.steps, h.emitted, h.draft_seconds + h.verify_seconds)
                if s.on:
                    s.speculative = sums
                else:
                    s.probes = sums
        return self

    # -- internals ------------------------------------------------------------------------------
    def _state(self, domain: str) -> DomainState:
        s = self._domains.get(domain)
        if s is None:
            halflife = self.config.halflife
            s = self._domains[domain] = DomainState({}, DecayingSums(halflife), DecayingSums(4 * halflife))
        return s

    def _flip(self, domain: str, s: DomainState, on: bool, reason: str) -> "Switch":
        """Turn ``domain`` on (watched) or off, for ``reason``."""
        return self._enter(domain, s, Watching(reason) if on else Off(reason))

    def _enter(self, domain: str, s: DomainState, state: State) -> "Switch":
        spec, base = speculative_goodput(s, self.config), estimate(s, 0, self.config)
        s.state, s.streak, s.suspect = state, 0, False
        state.enter(s, self.config)
        t = Transition(domain, state.on, state.reason, s.step, spec, base)
        s.history.append(t)
        del s.history[:-100]
        for listener in self._listeners:
            listener(t)
        return self


def switch_of(policy) -> Switch | None:
    """The on/off switch a policy runs behind (``policies.switched.Switched``), or None."""
    switch = getattr(policy, "switch", None)
    return switch if isinstance(switch, Switch) else None
