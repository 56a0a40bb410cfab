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
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

from policies.base import ArmStats, Outcome
from policies.estimates import DecayingSums
from policies.goodput import backed_out_acceptance


@dataclass(frozen=True)
class SwitchConfig:
    margin_off: float = 0.05  # off when best speculative goodput < (1 - margin_off) x K = 0's
    margin_on: float = 0.05  # back on when it is > (1 + margin_on) x K = 0's
    dwell: int = 30  # domain steps a condition must hold before a transition
    halflife: float = 40.0  # domain steps; how fast the speculative estimates forget
    baseline_halflife: float = 1000.0  # K = 0 costs change with load and hardware, not with acceptance
    min_samples: float = 4.0  # effective steps before a speculative arm's estimate counts
    min_baseline: float = 10.0  # effective K = 0 steps before K = 0's estimate counts
    confidence: float = 1.0  # a difference counts once it exceeds this many standard errors (for `dwell` steps)
    probe_fraction: float = 0.05  # share of steps that still speculate while off
    baseline_fraction: float = 0.1  # share of steps forced to K = 0 while K = 0 is short of min_baseline
    investigate_fraction: float = 0.25  # share of steps measuring the other side when a transition is
    # suggested but not yet significant (K = 0 while on, probes while off): evidence where it matters
    watch_steps: int = 200  # steps after re-enabling during which acceptance is watched
    collapse_ratio: float = 0.5  # acceptance below this share of the probes' acceptance is a collapse
    watch_tokens: int = 32  # drafted tokens needed before the watch judges
    reconsider_steps: int = 200  # after a model version change, steps of an off domain probed at investigate_fraction
    hold: bool = True  # while off, hold the policy's K > 0 back (False: it runs, measured as a probe)

    @classmethod
    def per_request(cls) -> "SwitchConfig":
        """For a policy that learns from whole requests (a proxy's pools: one aggregate record of dozens of
        steps per request). The defaults count single steps, so behind a proxy they took hundreds of
        requests to dwell and forced K = 0 on one request in ten until ten had run: in 24 requests of a
        domain where k8 was best, 10 went to ``off``. Here each count is requests: a request's goodput is
        already an average over its steps, so a few of them decide."""
        return cls(dwell=3, halflife=6.0, baseline_halflife=60.0, min_samples=2.0, min_baseline=2.0,
                   probe_fraction=0.02, baseline_fraction=0.02, investigate_fraction=0.1, watch_steps=10,
                   watch_tokens=32, reconsider_steps=10)

    @classmethod
    def deferring(cls) -> "SwitchConfig":
        """For a pool policy that weighs K = 0 itself (pool-cap: the ``off`` pool is one of its arms, its speed
        measured once for all domains). The switch then forces nothing: no K = 0 measured per domain, no
        probes, and while off the policy's K > 0 runs. It still follows each domain's requests and reports
        transitions (off once the policy has run K = 0 for ``dwell`` requests, on once speculation pays
        again). Holding K > 0 back behind a policy that already chose it for its measured goodput lost the
        requests the switch spent on ``off`` per domain to measure what the policy knew, and kept a domain on
        ``off`` for dozens of requests after the policy had moved back to a draft pool."""
        return dataclasses.replace(cls.per_request(), baseline_fraction=0.0, investigate_fraction=0.0,
                                   probe_fraction=0.0, hold=False)

    def __post_init__(self) -> None:
        if not isinstance(self.hold, bool):
            raise ValueError(f"hold must be True or False, got {self.hold!r}")
        for name in ("margin_off", "margin_on", "probe_fraction", "baseline_fraction", "investigate_fraction",
                     "collapse_ratio"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0 <= value < 1:
                raise ValueError(f"{name} must be in [0, 1), got {value!r}")
        for name in ("dwell", "watch_steps", "watch_tokens", "reconsider_steps"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name in ("halflife", "baseline_halflife", "min_samples", "min_baseline", "confidence"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be a positive number, got {value!r}")


@dataclass(frozen=True, slots=True)
class Transition:
    """Speculation turned on (``speculate``) or off for ``domain`` at that domain's step ``step``."""

    domain: str
    speculate: bool
    reason: str
    step: int
    speculative_goodput: float | None
    baseline_goodput: float | None


@dataclass
class _Domain:
    arms: dict[int, DecayingSums]  # per K: which speculative arm probes should run
    speculative: DecayingSums  # every K > 0 step pooled: what speculation gives now (fast memory)
    speculative_slow: DecayingSums  # the same with 4x the memory: small but lasting losses
    on: bool = True
    step: int = 0
    streak: int = 0  # consecutive steps the condition for leaving the current state held
    suspect: bool = False  # the point estimates favour a transition that is not yet significant
    since_baseline: int = 0
    watch_left: int = 0  # steps left in the post-enable watch
    watch_drafted: int = 0
    watch_accepted: int = 0
    watch_steps: int = 0
    probes: DecayingSums | None = None  # goodput of the probes since speculation went off
    probe_acceptance: DecayingSums | None = None  # acceptance seen by those probes (accepted / drafted)
    probe_depth: DecayingSums | None = None  # their drafted tokens per step
    reconsider_left: int = 0  # steps left of probing at investigate_fraction after a model version change
    wants: float = 1.0  # share of recent steps the policy proposed K > 0 (decayed over `dwell` steps)
    last_reason: str = "on: no evidence yet"
    history: list[Transition] = field(default_factory=list)


class Switch:
    """Per-domain on/off state. ``gate`` filters a policy's lookahead; ``update`` learns from each step."""

    def __init__(self, config: SwitchConfig | None = None, seed: int | None = None):
        import random

        self.config = config or SwitchConfig()
        self._rng = random.Random(seed)
        self._domains: dict[str, _Domain] = {}
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
        return self._speculative(s), self._estimate(s, 0)

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
        cfg = self.config
        f = self._wants_fade
        s.wants = s.wants * f + (1.0 - f if proposed > 0 else 0.0)
        if s.on:
            base = s.arms.get(0)
            weight = base.weight(s.step) if base is not None else 0.0
            # K = 0 fades slowly (baseline_halflife), so keeping it measured costs well under 1% of steps.
            due = s.since_baseline * cfg.baseline_fraction >= 1
            if proposed > 0 and weight < cfg.min_baseline and due:
                return 0, "switch: measuring K=0 (baseline)"
            if proposed > 0 and s.suspect and s.since_baseline * cfg.investigate_fraction >= 1:
                return 0, "switch: measuring K=0 (speculation looks slower)"
            return proposed, ""
        if proposed > 0 and not cfg.hold:
            return proposed, ""
        rate = cfg.investigate_fraction if s.suspect or s.reconsider_left > 0 else cfg.probe_fraction
        if self._rng.random() < rate:
            k = proposed if proposed > 0 else (self._best_arm(s) or fallback)
            return k, f"switch: off, probing K={k}"
        return 0, f"switch: off ({s.last_reason})"

    def update(self, domain: str, outcome: Outcome) -> "Switch":
        s = self._domains.get(domain) or self._state(domain)
        cfg = self.config
        s.step = step = s.step + 1
        if s.reconsider_left:
            s.reconsider_left -= 1
        k, emitted, seconds = outcome.lookahead, outcome.emitted, outcome.seconds  # an aggregate: one observation
        arm = s.arms.get(k)
        if arm is None:
            arm = s.arms[k] = DecayingSums(cfg.baseline_halflife if k == 0 else cfg.halflife)
        arm.add(step, emitted, seconds)
        if k > 0:
            s.since_baseline += 1
            s.speculative.add(step, emitted, seconds)
            s.speculative_slow.add(step, emitted, seconds)
            if not s.on:
                # Probes are rare, so their memory spans as many probes as `halflife` spans steps (not held back,
                # they are the policy's own choices, as frequent as any).
                halflife = cfg.halflife / max(cfg.probe_fraction, 1e-3) if cfg.hold else cfg.halflife
                s.probes = s.probes or DecayingSums(halflife)
                s.probe_acceptance = s.probe_acceptance or DecayingSums(halflife)
                s.probe_depth = s.probe_depth or DecayingSums(halflife)
                s.probe_depth.add(step, outcome.drafted, outcome.steps)
                s.probes.add(step, emitted, seconds)
                s.probe_acceptance.add(step, outcome.accepted, outcome.drafted)
            elif s.watch_left > 0:
                s.watch_left -= 1
                s.watch_drafted += outcome.drafted
                s.watch_accepted += outcome.accepted
                s.watch_steps += outcome.steps
                if self._collapsed(s):
                    return self._flip(domain, s, False, self._collapse_reason(s))
        else:
            s.since_baseline = 0
        # Each estimate is read once per step (weight and goodput in one call), in the same order as always:
        # a sum decayed at every step keeps the same rounding. Standard errors only where a point estimate
        # already favours a transition (the noise term can only hold one back).
        sums = s.speculative if s.on else s.probes
        spec = None
        if sums is not None:
            weight, spec = sums.read(step)
            if weight < cfg.min_samples:
                spec = None
        baseline = s.arms.get(0)
        if baseline is None:
            s.streak = 0
            return self
        weight, base = baseline.read(step)
        if weight < cfg.min_baseline:
            s.streak = 0
            return self
        if spec is None and s.on:  # nothing speculated lately: only the policy itself can have chosen that
            if k == 0:
                s.streak += 1
                if s.streak >= cfg.dwell:
                    self._flip(domain, s, False, f"off: the policy ran K=0 for {cfg.dwell}+ steps "
                                                 f"(K=0 {base:.0f} tok/s)")
            else:
                s.streak = 0
            return self
        if spec is None:
            s.streak = 0
            return self
        if s.on:
            # A large loss shows within a few dozen steps on the fast memory; a small one only on the slow.
            bar = (1 - cfg.margin_off) * base
            weight, slow = s.speculative_slow.read(step)
            losing = False
            if spec < bar or (weight >= cfg.min_samples and slow < bar):
                base_se = baseline.stderr(step)
                losing = (spec < bar - cfg.confidence * math.hypot(sums.stderr(step), base_se)
                          or weight >= cfg.min_samples
                          and slow < bar - cfg.confidence * math.hypot(s.speculative_slow.stderr(step), base_se))
            s.suspect = spec < bar
            s.streak = s.streak + 1 if losing else 0
            if s.streak >= cfg.dwell:
                self._flip(domain, s, False, f"off: speculative steps give {spec:.0f} tok/s < K=0 "
                                             f"{base:.0f} tok/s for {cfg.dwell} steps")
        else:
            s.suspect = spec > (1 + cfg.margin_on) * base
            paying = s.suspect and spec > (1 + cfg.margin_on) * base + cfg.confidence * math.hypot(
                sums.stderr(step), baseline.stderr(step))
            s.streak = s.streak + 1 if paying else 0
            if s.streak >= cfg.dwell and s.wants >= 0.5:
                self._flip(domain, s, True, f"on: probes give {spec:.0f} tok/s > K=0 {base:.0f} "
                                            f"tok/s for {cfg.dwell} steps")
        return self

    # -- warm start -----------------------------------------------------------------------------
    def warm_start(self, domain: str, history: Sequence[ArmStats], on: bool | None = None) -> "Switch":
        """Seed estimates from stored totals (capped to a few halflives) and the last stored state."""
        s = self._state(domain)
        if on is not None:
            s.on = on
            s.last_reason = "restored from history: " + ("on" if on else "off")
        usable = [h for h in history if h.steps > 0 and h.draft_seconds + h.verify_seconds > 0]
        for h in usable:
            halflife = self.config.baseline_halflife if h.lookahead == 0 else self.config.halflife
            s.arms.setdefault(h.lookahead, DecayingSums(halflife)).seed(
                s.step, h.steps, h.emitted, h.draft_seconds + h.verify_seconds)
        best = self._best_arm(s)
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
    def _state(self, domain: str) -> _Domain:
        s = self._domains.get(domain)
        if s is None:
            halflife = self.config.halflife
            s = self._domains[domain] = _Domain({}, DecayingSums(halflife), DecayingSums(4 * halflife))
        return s

    def _estimate(self, s: _Domain, k: int) -> float | None:
        arm = s.arms.get(k)
        need = self.config.min_baseline if k == 0 else self.config.min_samples
        if arm is None or arm.weight(s.step) < need:
            return None
        return arm.ratio(s.step)

    def _best_arm(self, s: _Domain) -> int | None:
        scored = [(self._estimate(s, k), k) for k in s.arms if k > 0]
        scored = [(g, k) for g, k in scored if g is not None]
        return max(scored)[1] if scored else None

    def _speculative(self, s: _Domain) -> float | None:
        """Goodput of recent speculative steps while on; of the probes while off."""
        sums = s.speculative if s.on else s.probes
        if sums is None or sums.weight(s.step) < self.config.min_samples:
            return None
        return sums.ratio(s.step)

    def _per_token(self, s: _Domain) -> tuple[float | None, float | None]:
        """(since re-enabling, while probing): per-token acceptance, backed out of each side's accepted
        tokens at its own drafted tokens per step. accepted / drafted itself falls with K (later positions
        are reached less often), so comparing it between probes at a small K and a policy drafting up to 8
        read a collapse into a draft that was fine: logs went on and off 7 times in 5 s after the
        re-distilled draft came in."""
        if s.probe_acceptance is None or s.probe_depth is None or s.watch_steps <= 0:
            return None, None
        depth = s.probe_depth.ratio(s.step)  # drafted per step
        probe = backed_out_acceptance([1.0], [s.probe_acceptance.ratio(s.step) * depth], [depth])
        watch = backed_out_acceptance([float(s.watch_steps)], [float(s.watch_accepted)],
                                      [s.watch_drafted / s.watch_steps])
        return watch, probe

    def _collapsed(self, s: _Domain) -> bool:
        if s.watch_drafted < self.config.watch_tokens:
            return False
        watch, probe = self._per_token(s)
        return watch is not None and probe is not None and probe > 0 and watch < self.config.collapse_ratio * probe

    def _collapse_reason(self, s: _Domain) -> str:
        watch, probe = self._per_token(s)
        return (f"off: acceptance collapsed after re-enabling (per token {watch or 0.0:.2f} vs {probe or 0.0:.2f} "
                "while probing)")

    def _flip(self, domain: str, s: _Domain, on: bool, reason: str) -> "Switch":
        spec, base = self._speculative(s), self._estimate(s, 0)
        s.on, s.streak, s.suspect, s.last_reason = on, 0, False, reason
        if on:
            s.watch_left, s.watch_drafted, s.watch_accepted, s.watch_steps = self.config.watch_steps, 0, 0, 0
        else:
            s.watch_left, s.probes, s.probe_acceptance, s.probe_depth = 0, None, None, None
        t = Transition(domain, on, reason, s.step, spec, base)
        s.history.append(t)
        del s.history[:-100]
        for listener in self._listeners:
            listener(t)
        return self


def switch_of(policy) -> Switch | None:
    """The on/off switch a policy runs behind (``policies.switched.Switched``), or None."""
    switch = getattr(policy, "switch", None)
    return switch if isinstance(switch, Switch) else None
