"""The switch's states, one class each: ``On``, ``Watching`` (on, just re-enabled) and ``Off`` (probing).

A domain's measurements live in ``DomainState``; its state object holds only why the domain is in it. Each
state answers two questions: ``gate`` (what lookahead runs now) and ``update`` (given the step just
recorded, which state comes next; ``self`` to stay). ``policies.switch.Switch`` owns the domains, records
each step and makes the transitions.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from policies.base import Outcome
from policies.estimates import DecayingSums
from policies.goodput import backed_out_acceptance

if TYPE_CHECKING:
    from policies.switch_config import SwitchConfig, Transition


class State:
    """Where a domain is, and why (``reason``)."""

    on = True

    def __init__(self, reason: str):
        self.reason = reason

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.reason!r})"

    def enter(self, s: "DomainState", cfg: "SwitchConfig") -> None:
        """Set up what this state measures (a transition into it)."""

    def gate(self, s: "DomainState", proposed: int, fallback: int, cfg: "SwitchConfig",
             rng: random.Random) -> tuple[int, str]:
        raise NotImplementedError

    def update(self, s: "DomainState", outcome: Outcome, cfg: "SwitchConfig") -> "State":
        raise NotImplementedError


class On(State):
    """Speculating. Off when recent speculative steps lose to K = 0 beyond noise for ``dwell`` steps, or when
    the policy itself ran K = 0 that long."""

    def gate(self, s: "DomainState", proposed: int, fallback: int, cfg: "SwitchConfig",
             rng: random.Random) -> tuple[int, str]:
        base = s.arms.get(0)
        weight = base.weight(s.step) if base is not None else 0.0
        # K = 0 fades slowly (baseline_halflife), so keeping it measured costs well under 1% of steps.
        due = s.since_baseline * cfg.baseline_fraction >= 1
        if proposed > 0 and weight < cfg.min_baseline and due:
            return 0, "switch: measuring K=0 (baseline)"
        if proposed > 0 and s.suspect and s.since_baseline * cfg.investigate_fraction >= 1:
            return 0, "switch: measuring K=0 (speculation looks slower)"
        return proposed, ""

    def update(self, s: "DomainState", outcome: Outcome, cfg: "SwitchConfig") -> State:
        read = _read(s, s.speculative, cfg)
        if read is None:
            s.streak = 0
            return self
        spec, baseline, base = read
        if spec is None:  # nothing speculated lately: only the policy itself can have chosen that
            s.streak = s.streak + 1 if outcome.lookahead == 0 else 0
            if s.streak >= cfg.dwell:
                return Off(f"off: the policy ran K=0 for {cfg.dwell}+ steps (K=0 {base:.0f} tok/s)")
            return self
        bar = (1 - cfg.margin_off) * base
        losing = _losing(s, spec, baseline, bar, cfg)
        s.suspect = spec < bar
        s.streak = s.streak + 1 if losing else 0
        if s.streak >= cfg.dwell:
            return Off(f"off: speculative steps give {spec:.0f} tok/s < K=0 {base:.0f} tok/s for {cfg.dwell} steps")
        return self


class Watching(On):
    """On, for the first ``watch_steps`` speculative steps after re-enabling: acceptance collapsing below
    ``collapse_ratio`` of what the probes saw turns speculation off at once; otherwise as ``On``."""

    def enter(self, s: "DomainState", cfg: "SwitchConfig") -> None:
        s.watch_left, s.watch_drafted, s.watch_accepted, s.watch_steps = cfg.watch_steps, 0, 0, 0

    def update(self, s: "DomainState", outcome: Outcome, cfg: "SwitchConfig") -> State:
        if outcome.lookahead > 0 and s.watch_left > 0:
            collapse = _watch(s, outcome, cfg)
            if collapse:
                return Off(collapse)
        after = On.update(self, s, outcome, cfg)
        return On(self.reason) if after is self and s.watch_left == 0 else after


class Off(State):
    """Not speculating, but probing: a ``probe_fraction`` of steps (``investigate_fraction`` while a recovery
    looks likely or after a model version change) still speculate. On again when the probes beat K = 0
    beyond noise for ``dwell`` steps and the policy underneath would speculate."""

    on = False

    def enter(self, s: "DomainState", cfg: "SwitchConfig") -> None:
        s.watch_left, s.probes, s.probe_acceptance, s.probe_depth = 0, None, None, None

    def gate(self, s: "DomainState", proposed: int, fallback: int, cfg: "SwitchConfig",
             rng: random.Random) -> tuple[int, str]:
        if proposed > 0 and not cfg.hold:
            return proposed, ""
        rate = cfg.investigate_fraction if s.suspect or s.reconsider_left > 0 else cfg.probe_fraction
        if rng.random() < rate:
            k = proposed if proposed > 0 else (best_arm(s, cfg) or fallback)
            return k, f"switch: off, probing K={k}"
        return 0, f"switch: off ({self.reason})"

    def update(self, s: "DomainState", outcome: Outcome, cfg: "SwitchConfig") -> State:
        if outcome.lookahead > 0:
            _probe(s, outcome, cfg)
        read = _read(s, s.probes, cfg)
        if read is None or read[0] is None:
            s.streak = 0
            return self
        spec, baseline, base = read
        s.suspect = spec > (1 + cfg.margin_on) * base
        paying = s.suspect and spec > (1 + cfg.margin_on) * base + cfg.confidence * math.hypot(
            s.probes.stderr(s.step), baseline.stderr(s.step))
        s.streak = s.streak + 1 if paying else 0
        if s.streak >= cfg.dwell and s.wants >= 0.5:
            return Watching(f"on: probes give {spec:.0f} tok/s > K=0 {base:.0f} tok/s for {cfg.dwell} steps")
        return self


@dataclass
class DomainState:
    """One domain's measurements and its state (``state``)."""

    arms: dict[int, DecayingSums]  # per K: which speculative arm probes should run
    speculative: DecayingSums  # every K > 0 step pooled: what speculation gives now (fast memory)
    speculative_slow: DecayingSums  # the same with 4x the memory: small but lasting losses
    state: State = field(default_factory=lambda: On("on: no evidence yet"))
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
    history: list["Transition"] = field(default_factory=list)

    @property
    def on(self) -> bool:
        return self.state.on

    @property
    def last_reason(self) -> str:
        return self.state.reason

    def record(self, outcome: Outcome, cfg: "SwitchConfig") -> None:
        """Count one step into the estimates every state reads."""
        self.step = step = self.step + 1
        if self.reconsider_left:
            self.reconsider_left -= 1
        k, emitted, seconds = outcome.lookahead, outcome.emitted, outcome.seconds  # an aggregate: one observation
        arm = self.arms.get(k)
        if arm is None:
            arm = self.arms[k] = DecayingSums(cfg.baseline_halflife if k == 0 else cfg.halflife)
        arm.add(step, emitted, seconds)
        if k > 0:
            self.since_baseline += 1
            self.speculative.add(step, emitted, seconds)
            self.speculative_slow.add(step, emitted, seconds)
        else:
            self.since_baseline = 0


def estimate(s: DomainState, k: int, cfg: "SwitchConfig") -> float | None:
    """Goodput of arm ``k``; None until it has ``min_samples`` (K = 0: ``min_baseline``) effective steps."""
    arm = s.arms.get(k)
    need = cfg.min_baseline if k == 0 else cfg.min_samples
    if arm is None or arm.weight(s.step) < need:
        return None
    return arm.ratio(s.step)


def best_arm(s: DomainState, cfg: "SwitchConfig") -> int | None:
    scored = [(estimate(s, k, cfg), k) for k in s.arms if k > 0]
    scored = [(g, k) for g, k in scored if g is not None]
    return max(scored)[1] if scored else None


def speculative_goodput(s: DomainState, cfg: "SwitchConfig") -> float | None:
    """Goodput of recent speculative steps while on; of the probes while off."""
    sums = s.speculative if s.on else s.probes
    if sums is None or sums.weight(s.step) < cfg.min_samples:
        return None
    return sums.ratio(s.step)


def _read(s: DomainState, sums: DecayingSums | None,
          cfg: "SwitchConfig") -> tuple[float | None, DecayingSums, float] | None:
    """(speculative goodput or None while thin, K = 0's sums, K = 0's goodput); None while K = 0 is thin.

    Each estimate is read once per step (weight and goodput in one call), in the same order as always: a sum
    decayed at every step keeps the same rounding. Standard errors only where a point estimate already
    favours a transition (the noise term can only hold one back)."""
    spec = None
    if sums is not None:
        weight, spec = sums.read(s.step)
        if weight < cfg.min_samples:
            spec = None
    baseline = s.arms.get(0)
    if baseline is None:
        return None
    weight, base = baseline.read(s.step)
    if weight < cfg.min_baseline:
        return None
    return spec, baseline, base


def _losing(s: DomainState, spec: float, baseline: DecayingSums, bar: float, cfg: "SwitchConfig") -> bool:
    """Speculation below ``bar`` beyond noise. A large loss shows within a few dozen steps on the fast memory;
    a small one only on the slow."""
    weight, slow = s.speculative_slow.read(s.step)
    if not (spec < bar or (weight >= cfg.min_samples and slow < bar)):
        return False
    base_se = baseline.stderr(s.step)
    return (spec < bar - cfg.confidence * math.hypot(s.speculative.stderr(s.step), base_se)
            or weight >= cfg.min_samples
            and slow < bar - cfg.confidence * math.hypot(s.speculative_slow.stderr(s.step), base_se))


def _probe(s: DomainState, outcome: Outcome, cfg: "SwitchConfig") -> None:
    """Count a speculative step taken while off. Probes are rare, so their memory spans as many probes as
    `halflife` spans steps (not held back, they are the policy's own choices, as frequent as any)."""
    halflife = cfg.halflife / max(cfg.probe_fraction, 1e-3) if cfg.hold else cfg.halflife
    s.probes = s.probes or DecayingSums(halflife)
    s.probe_acceptance = s.probe_acceptance or DecayingSums(halflife)
    s.probe_depth = s.probe_depth or DecayingSums(halflife)
    s.probe_depth.add(s.step, outcome.drafted, outcome.steps)
    s.probes.add(s.step, outcome.emitted, outcome.seconds)
    s.probe_acceptance.add(s.step, outcome.accepted, outcome.drafted)


def _watch(s: DomainState, outcome: Outcome, cfg: "SwitchConfig") -> str | None:
    """Count a speculative step of the watch; why acceptance collapsed, or None."""
    s.watch_left -= 1
    s.watch_drafted += outcome.drafted
    s.watch_accepted += outcome.accepted
    s.watch_steps += outcome.steps
    if s.watch_drafted < cfg.watch_tokens:
        return None
    watch, probe = _per_token(s)
    if watch is not None and probe is not None and probe > 0 and watch < cfg.collapse_ratio * probe:
        return f"off: acceptance collapsed after re-enabling (per token {watch:.2f} vs {probe:.2f} while probing)"
    return None


def _per_token(s: DomainState) -> tuple[float | None, float | None]:
    """(since re-enabling, while probing): per-token acceptance, backed out of each side's accepted tokens at
    its own drafted tokens per step. accepted / drafted itself falls with K (later positions are reached less
    often), so comparing it between probes at a small K and a policy drafting up to 8 read a collapse into a
    draft that was fine: logs went on and off 7 times in 5 s after the re-distilled draft came in."""
    if s.probe_acceptance is None or s.probe_depth is None or s.watch_steps <= 0:
        return None, None
    depth = s.probe_depth.ratio(s.step)  # drafted per step
    probe = backed_out_acceptance([1.0], [s.probe_acceptance.ratio(s.step) * depth], [depth])
    watch = backed_out_acceptance([float(s.watch_steps)], [float(s.watch_accepted)],
                                  [s.watch_drafted / s.watch_steps])
    return watch, probe
