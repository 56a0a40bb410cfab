"""Discounted Thompson sampling over lookaheads K = 0..kmax, rewarded by measured goodput.

Treating each K as an arm follows BanditSpec (arXiv 2505.15141); discounting old steps so that the policy
follows a drifting world (stale draft, changing load) follows discounted Thompson sampling for
non-stationary bandits (Qi et al., arXiv 2305.10718).

Each arm's posterior for goodput R = E[emitted] / E[seconds] is Normal around the ratio of discounted
sums, with the delta-method standard error sqrt(var(emitted - R seconds) / n) / mean(seconds), which keeps
the correlation between tokens and time. The per-step variance is shrunk toward a prior (coefficient of
variation ``prior_cv`` with weight ``prior_weight`` steps): a floor, so that two identical steps do not
make the posterior a spike, and an honest width for arms seen once or twice.
"""

from __future__ import annotations

import math
import random
from statistics import NormalDist
from typing import Sequence

from policies.arms import DiscountedArms
from policies.base import ArmStats, Decision, Outcome, Policy


def goodput_posteriors(arms: DiscountedArms, prior_cv: float,
                       prior_weight: float) -> list[tuple[float, float, float]]:
    """(mean, standard deviation, discounted n) of each arm's goodput; (0, inf, 0) for an arm without data.

    Mean: ratio of discounted sums R. Standard deviation: sqrt(v / n) / mean(seconds), where v is the
    per-step variance of emitted - R * seconds (DiscountedArms.residual_var) shrunk toward the prior
    (prior_cv * mean(emitted))² with weight ``prior_weight`` steps.
    """
    out, scale = [], arms.scale
    pw, cv2 = prior_weight, prior_cv * prior_cv
    # Inlined, on stored (scaled) sums with n_true = n / scale: this runs for every arm before every step.
    for n, e, s, ee, es, ss in zip(arms.n, arms.e, arms.s, arms.ee, arms.es, arms.ss):
        if n <= 0 or s <= 0:
            out.append((0.0, math.inf, 0.0))
            continue
        r = e / s
        resid_sum = ee - 2.0 * r * es + r * r * ss  # n * per-step variance, >= 0 up to rounding
        n_true = n / scale
        v = ((resid_sum if resid_sum > 0.0 else 0.0) / scale + pw * cv2 * (e / n) ** 2) / (n_true + pw)
        out.append((r, math.sqrt(v * n * scale) / s, n_true))
    return out


class _Domain:
    __slots__ = ("arms", "rng", "normal")

    def __init__(self, arms: DiscountedArms, rng: random.Random):
        self.arms, self.rng = arms, rng
        # Standard normal by inversion: one rng.random() per draw, several times faster than rng.gauss.
        self.normal = NormalDist().inv_cdf


class DiscountedThompson(Policy):
    """Discounted Thompson sampling of the lookahead, per domain.

    Parameters
    ----------
    kmax
        Largest lookahead; arms are 0..kmax (0: no speculation).
    gamma
        Discount per step of the domain. Memory is about 1 / (1 - gamma) steps (200 at 0.995).
    prior_cv
        Prior coefficient of variation of per-step goodput (speculative steps emit a truncated geometric
        number of tokens, with a CV near 0.5).
    prior_weight
        How many steps the prior variance counts as.
    warm_cap
        Largest number of steps one arm's history counts as in ``warm_start``; None: 1 / (1 - gamma).
    seed
        Seeds the per-domain random streams (derived from the seed and the domain label).
    """

    name = "thompson"

    def __init__(self, kmax: int = 8, gamma: float = 0.995, prior_cv: float = 0.5, prior_weight: float = 1.0,
                 warm_cap: float | None = None, seed: int | None = None):
        super().__init__(kmax, seed)
        if not 0.0 < gamma <= 1.0:
            raise ValueError(f"gamma must be in (0, 1], got {gamma!r}")
        if not 0.0 < prior_cv < math.inf:
            raise ValueError(f"prior_cv must be positive, got {prior_cv!r}")
        if not 0.0 < prior_weight < math.inf:
            raise ValueError(f"prior_weight must be positive, got {prior_weight!r}")
        if warm_cap is not None and not warm_cap > 0:
            raise ValueError(f"warm_cap must be positive or None, got {warm_cap!r}")
        self.gamma = gamma
        self.prior_cv = prior_cv
        self.prior_weight = prior_weight
        self.warm_cap = warm_cap
        self._domains: dict[str, _Domain] = {}

    def _new(self, domain: str) -> _Domain:
        # A stream per domain, so one domain's choices do not depend on other domains' traffic.
        seed = self._rng.getrandbits(64) if self.seed is None else f"{self.seed}\x00{domain}"
        state = self._domains[domain] = _Domain(DiscountedArms(self.kmax + 1, self.gamma), random.Random(seed))
        return state

    def choose(self, domain: str) -> Decision:
        state = self._domains.get(domain) or self._new(domain)
        arms, rng = state.arms, state.rng
        if min(arms.n) <= 0:
            untried = [k for k, n in enumerate(arms.n) if n <= 0]
            k = rng.choice(untried)
            return self.decision(k, f"thompson: K={k} untried")
        normal = state.normal
        best_k, best_x = 0, -math.inf
        posteriors = goodput_posteriors(arms, self.prior_cv, self.prior_weight)
        for k, (r, sd, _) in enumerate(posteriors):
            x = r + sd * normal(rng.random() or 0.5)  # inv_cdf rejects 0.0 (probability 2^-53)
            if x > best_x:
                best_k, best_x = k, x
        r, _, n = posteriors[best_k]
        return self.decision(best_k, f"thompson: K={best_k} sampled {best_x:.0f} tok/s "
                                     f"(mean {r:.0f}, n={n:.0f})")

    def update(self, domain: str, outcome: Outcome) -> "DiscountedThompson":
        """Learn from one step (or one aggregate of steps: one observation of its tokens and time). Steps
        outside 0..kmax, or without measured time, carry no goodput here."""
        k, seconds = outcome.lookahead, outcome.seconds
        if 0 <= k <= self.kmax and seconds > 0:
            state = self._domains.get(domain) or self._new(domain)
            state.arms.push(k, outcome.emitted, seconds)
        return self

    def warm_start(self, domain: str, history: Sequence[ArmStats]) -> "DiscountedThompson":
        """Replace ``domain``'s state by stored totals (each arm capped at ``warm_cap`` steps)."""
        state = self._new(domain)
        cap = self.warm_cap
        if cap is None:
            cap = 1.0 / (1.0 - self.gamma) if self.gamma < 1 else math.inf
        for h in history:
            if 0 <= h.lookahead <= self.kmax:
                state.arms.add_totals(h.lookahead, h.steps, h.emitted, h.draft_seconds + h.verify_seconds,
                                      cap=cap, cv=self.prior_cv)
        return self

    def forget(self, domain: str) -> "DiscountedThompson":
        self._domains.pop(domain, None)  # a fit in flight checks its state is still the domain's
        return self

    def __repr__(self) -> str:
        return (f"DiscountedThompson(kmax={self.kmax}, gamma={self.gamma}, prior_cv={self.prior_cv}, "
                f"prior_weight={self.prior_weight}, warm_cap={self.warm_cap}, seed={self.seed})")
