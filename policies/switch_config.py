"""The switch's settings and the transitions it reports (policies/switch.py), apart so the switch and its
states (policies/switch_states.py) both read them without importing each other."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass


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
