"""Model-based lookahead: fit acceptance by position and cost by K, then pick the K of best predicted goodput.

Per domain it keeps discounted sums (halflife counted in the domain's steps, so a target update that
collapses acceptance fades the old evidence): drafts that reached / were accepted at each position, and
steps, draft seconds and verify seconds per K (an aggregate of many steps adds the per-position counts
its mean accepted tokens imply at constant per-token acceptance: goodput.implied_lengths). Every
``refresh_every`` steps it estimates conditional acceptance per position and the step cost per K from those
sums, each shrunk toward a smooth trend that scikit-learn re-fits every ``refit_every`` steps
(``policies.fit``: logistic in position, linear in K), so rarely seen positions and K borrow strength from
their neighbours. The K in 0..kmax maximising predicted goodput E[emitted | K] / E[seconds | K] wins:
Leviathan et al.'s formula (arXiv 2211.17192) with per-position acceptance and measured costs, K = 0
included as in SmartSpec (arXiv 2406.14066).

Positions beyond the chosen K are never observed, so with probability ``explore`` a step is a probe: one
or two more than the best K (learns the next positions; from K = 0 it keeps checking whether speculation
pays again) or K = 0 (keeps the plain step's cost measured). Until ``warmup`` steps have run it cycles a
few K (the first is kmax // 2) to measure costs across the range.

The scikit-learn fits take milliseconds, so they stay off the per-step path: ``update`` only marks a
domain due and ``refit`` (the sidecar's scheduler job) fits every due domain, in three phases so a lock
guarding the policy is held only to copy sums and to swap results in (``prepare_refit``). Until refit is
first called, or once ``overdue`` updates pass without one (no scheduler), update fits inline as due.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

from policies import fit
from policies.base import ArmStats, Decision, Outcome, Policy
from policies.goodput import argmax_goodput, goodput_table, implied_lengths


@dataclass(frozen=True, slots=True)
class Prediction:
    """One fit of a domain: ``cond[i]`` conditional acceptance at position i + 1; ``verify[k]`` seconds of a
    K-step beyond its k draft tokens; per K, predicted ``emitted`` tokens, ``seconds`` and ``goodput``;
    ``best`` the argmax of goodput."""

    cond: tuple[float, ...]
    draft_per_token: float
    verify: tuple[float, ...]
    emitted: tuple[float, ...]
    seconds: tuple[float, ...]
    goodput: tuple[float, ...]
    best: int


class _Domain:
    """Sums kept with a growing weight (``scale``) instead of decaying every entry on every step; dividing
    by ``scale`` gives the discounted sums. Per-position counts go to histograms of how far each step got
    (one add per step), folded into ``reached`` / ``accepted`` by ``settle``, which also renormalises."""

    __slots__ = ("steps", "scale", "reached", "accepted", "reached_hist", "accepted_hist", "weight", "draft",
                 "verify", "pred", "decision", "probes", "next_refresh", "next_fit", "fit_due", "seen", "expected",
                 "accept_trend", "cost_trend")

    def __init__(self, kmax: int, first_fit: int):
        self.steps, self.scale, self.next_refresh, self.next_fit = 0, 1.0, first_fit, first_fit
        self.fit_due = False  # the trends are due for a refit by the scheduler
        self.seen, self.expected = [0.0, 0.0], [0.0, 0.0]  # tokens, seconds since the last trend fit
        self.accept_trend: list[float] = []
        self.cost_trend: list[float] = []
        self.reached, self.accepted = [0.0] * kmax, [0.0] * kmax
        # [n]: weight of steps that reached (were accepted at) exactly the first n positions
        self.reached_hist, self.accepted_hist = [0.0] * (kmax + 1), [0.0] * (kmax + 1)
        self.weight, self.draft, self.verify = [0.0] * (kmax + 1), [0.0] * (kmax + 1), [0.0] * (kmax + 1)
        self.pred: Prediction | None = None
        self.decision: Decision | None = None
        self.probes: dict[int, Decision] = {}  # probe decisions by K, for the current prediction

    def settle(self) -> None:
        """Fold the histograms into the per-position sums and renormalise to ``scale`` 1."""
        for hist, sums in ((self.reached_hist, self.reached), (self.accepted_hist, self.accepted)):
            run = 0.0
            for n in range(len(sums), 0, -1):  # a step that got n positions far counts at 1..n
                run += hist[n]
                sums[n - 1] += run
            hist[:] = [0.0] * len(hist)
        inv = 1.0 / self.scale
        for xs in (self.reached, self.accepted, self.weight, self.draft, self.verify):
            xs[:] = [x * inv for x in xs]
        self.scale = 1.0


class ModelBased(Policy):
    """Argmax of predicted goodput under fitted acceptance and cost curves, with probes; see the module doc.

    ``halflife``: steps of a domain after which evidence weighs half (300: a collapse of acceptance turns
    speculation off within about two halflives, while ~430 effective steps keep estimates steady).
    ``refresh_every``: steps between re-decisions from the current sums (pure Python, tens of us).
    ``refit_every``: steps between scikit-learn fits of the trends once settled (the gap doubles from
    ``warmup`` up to it); a fit costs a few milliseconds, mostly sklearn's input checks.
    ``surprise``: refit the trends at the next refresh when measured goodput since the last fit strays
    from the predicted one by more than this log-ratio, so a change is followed at once while a steady
    domain pays for few fits.
    ``warmup``: steps of cycling K before the first fit. ``explore``: probability that a step is a probe.
    ``overdue``: updates (all domains) without a ``refit`` call after which update fits inline again.
    ``clip``: a step costing more than ``clip`` times its predicted seconds (a GC pause, a preemption)
    counts as ``clip`` times. ``accept_prior`` / ``cost_prior``: pseudo-steps pulling each position / each
    K toward the fitted trend.
    """

    name = "model-based"

    def __init__(self, kmax: int = 8, seed: int | None = None, *, halflife: float = 300.0,
                 refresh_every: int = 50, refit_every: int = 500, warmup: int = 40, explore: float = 0.05,
                 surprise: float = 0.25, clip: float = 4.0, accept_prior: float = 5.0, cost_prior: float = 5.0,
                 overdue: int = 100_000):
        super().__init__(kmax, seed)
        if not halflife > 0:
            raise ValueError(f"halflife must be positive, got {halflife!r}")
        for label, value in (("refresh_every", refresh_every), ("refit_every", refit_every), ("warmup", warmup),
                             ("overdue", overdue)):
            if type(value) is not int or value < 1:
                raise ValueError(f"{label} must be an integer >= 1, got {value!r}")
        if refresh_every > 100 * halflife:  # the lazily grown weights would overflow between refreshes
            raise ValueError(f"refresh_every must be at most 100 halflives, got {refresh_every!r}")
        if not 0.0 <= explore < 1.0:
            raise ValueError(f"explore must be in [0, 1), got {explore!r}")
        if not surprise > 0:
            raise ValueError(f"surprise must be positive, got {surprise!r}")
        if not clip > 1.0:
            raise ValueError(f"clip must be > 1, got {clip!r}")
        if not (accept_prior > 0 and cost_prior > 0):
            raise ValueError(f"accept_prior and cost_prior must be positive, got {accept_prior!r}, "
                             f"{cost_prior!r}")
        self.halflife, self.refresh_every, self.refit_every = float(halflife), refresh_every, refit_every
        self.warmup, self.explore = warmup, explore
        self.surprise, self.clip, self.accept_prior, self.cost_prior = surprise, clip, accept_prior, cost_prior
        self.overdue = overdue
        self._since_refit = math.inf  # updates since refit() last ran; over ``overdue``: fit inline
        self._growth = 2.0 ** (1.0 / self.halflife)
        self._cycle = tuple(dict.fromkeys((max(1, kmax // 2), kmax, 0, 1)))
        cycle = ",".join(map(str, self._cycle))
        self._warmup = {(k, done): self.decision(k, f"warmup: cycling K over {cycle} to measure acceptance "
                                                    f"and costs ({'first fit due' if done else f'{warmup} steps'})")
                        for k in self._cycle for done in (False, True)}
        self._domains: dict[str, _Domain] = {}

    # -- the per-step path: cheap ------------------------------------------------------------------
    def choose(self, domain: str) -> Decision:
        st = self._domains.get(domain) or self._new(domain)
        if st.decision is None:
            k = self._cycle[st.steps % len(self._cycle)]
            return self._warmup[(k, st.steps >= self.warmup)]
        if self.explore and self._rng.random() < self.explore:
            return self._probe(st)
        return st.decision

    def update(self, domain: str, outcome: Outcome) -> "ModelBased":
        st = self._domains.get(domain) or self._new(domain)
        self._since_refit += 1
        k, w, kmax, n = outcome.lookahead, st.scale, self.kmax, outcome.steps
        st.scale *= self._growth
        st.steps += 1
        if n == 1 and outcome.drafted == k:
            acc = min(outcome.accepted, k)
            # Per-position counts stop at the first rejection: later drafted tokens were never verified.
            st.reached_hist[min(acc + 1, k, kmax)] += w
            st.accepted_hist[min(acc, kmax)] += w
        elif k:  # an aggregate: its positions are unknown; the lengths its mean implies (implied_lengths)
            for acc, share in enumerate(implied_lengths(k, outcome.accepted / n)):
                st.reached_hist[min(acc + 1, k, kmax)] += w * n * share
                st.accepted_hist[min(acc, kmax)] += w * n * share
        if k <= kmax:
            # time not split by the engine counts as verify time (as storage keeps it)
            d, v = outcome.draft_seconds, outcome.seconds - outcome.draft_seconds
            pred = st.pred
            if pred is not None:
                cap = self.clip * pred.seconds[k] * n
                if d + v > cap > 0:
                    d, v = d * cap / (d + v), v * cap / (d + v)
                seen, expected = st.seen, st.expected
                seen[0] += outcome.emitted
                seen[1] += d + v
                expected[0] += pred.emitted[k] * n
                expected[1] += pred.seconds[k] * n
            st.weight[k] += w * n
            st.draft[k] += w * d
            st.verify[k] += w * v
        if st.steps >= st.next_refresh:
            due = st.fit_due or st.steps >= st.next_fit or self._surprised(st)
            inline = due and self._since_refit > self.overdue  # nobody calls refit(): fit here
            st.fit_due = due and not inline
            self._refresh(st, inline)
        return self

    def _surprised(self, st: _Domain) -> bool:
        (tokens, seconds), (tokens_hat, seconds_hat) = st.seen, st.expected
        if tokens <= 0 or seconds <= 0 or seconds_hat <= 0:
            return False
        return abs(math.log(tokens * seconds_hat / (seconds * tokens_hat))) > self.surprise

    # -- fits ----------------------------------------------------------------------------------------
    def refit(self) -> "ModelBased":
        """Fit the trends of every due domain now (single-threaded callers; see ``prepare_refit``)."""
        self.prepare_refit()()()
        return self

    def prepare_refit(self) -> Callable[[], Callable[[], None]]:
        """Copy the sums of every due domain (call under the lock that guards the policy; microseconds).
        Returns ``compute``: the scikit-learn fits on those copies, touching nothing shared (call without
        the lock), which returns ``apply``: installs the trends and re-decides (call under the lock)."""
        self._since_refit = 0
        jobs = []
        for domain, st in self._domains.items():
            if st.fit_due:
                st.fit_due = False
                st.settle()
                _, fixed = fit.fixed_cost_sums(st.weight, st.draft, st.verify)
                self._fitted(st)
                jobs.append((domain, st, list(st.reached), list(st.accepted), list(st.weight), fixed))

        def compute() -> Callable[[], None]:
            trends = [(domain, st, fit.acceptance_trend(reached, accepted), fit.cost_trend(weight, fixed))
                      for domain, st, reached, accepted, weight, fixed in jobs]

            def apply() -> None:
                for domain, st, accept, cost in trends:
                    if self._domains.get(domain) is st:  # not reset meanwhile
                        st.accept_trend, st.cost_trend = accept, cost
                        self._refresh(st, False)
            return apply
        return compute

    def _fitted(self, st: _Domain) -> None:
        st.next_fit = st.steps + min(self.refit_every, max(self.warmup, st.steps))  # doubling, then steady
        st.seen, st.expected = [0.0, 0.0], [0.0, 0.0]

    def _refresh(self, st: _Domain, refit: bool) -> None:
        """Re-decide from the current sums; with ``refit``, first re-fit the trends they shrink toward."""
        st.settle()
        st.next_refresh = st.steps + self.refresh_every
        per_token, fixed = fit.fixed_cost_sums(st.weight, st.draft, st.verify)
        if refit:
            st.accept_trend = fit.acceptance_trend(st.reached, st.accepted)
            st.cost_trend = fit.cost_trend(st.weight, fixed)
            self._fitted(st)
        elif not st.accept_trend:  # no fit yet: stay in the warmup until the first one
            return
        cond = tuple(fit.shrink(st.accepted, st.reached, st.accept_trend, self.accept_prior))
        verify = tuple(fit.shrink(fixed, st.weight, st.cost_trend, self.cost_prior))
        emitted, seconds, scores = goodput_table(cond, per_token, verify, self.kmax)
        best = argmax_goodput(scores)
        st.pred, st.probes = Prediction(cond, per_token, verify, emitted, seconds, scores, best), {}
        shown = " ".join(f"{c:.2f}".removeprefix("0") for c in cond[: min(self.kmax, max(best, 1) + 1)])
        st.decision = self.decision(best, f"model: K={best} predicts {_rate(scores[best])} tok/s "
                                          f"(K=0 {_rate(scores[0])}), cond accept {shown}")

    def _probe(self, st: _Domain) -> Decision:
        pred = st.pred
        best = pred.best
        options = [k for k in (best + 1, best + 2) if k <= self.kmax] + ([0] if best > 0 else [])
        if options == [0]:
            options.append(best - 1)
        k = self._rng.choice(options)
        decision = st.probes.get(k)
        if decision is None:  # the same object until the next refresh, so wrappers can reuse theirs
            what = "the plain-step cost" if k == 0 else f"acceptance up to position {k}"
            decision = st.probes[k] = self.decision(k, f"probe: K={k} measures {what}; model best K={best} "
                                                       f"({_rate(pred.goodput[best])} tok/s)")
        return decision

    def _new(self, domain: str) -> _Domain:
        st = self._domains[domain] = _Domain(self.kmax, self.warmup)
        return st

    # -- history and inspection ------------------------------------------------------------------------
    def warm_start(self, domain: str, history: Sequence[ArmStats]) -> "ModelBased":
        """Seed ``domain`` from stored totals, weighing at most one halflife-window of fresh steps
        (1 / (1 - discount), the steady-state discounted mass), and fit at once: no warmup."""
        total = sum(h.steps for h in history)
        if total <= 0:
            return self
        st = self._domains.get(domain) or self._new(domain)
        f = min(1.0, 1.0 / (1.0 - 1.0 / self._growth) / total) * st.scale
        for h in history:
            for i, (r, a) in enumerate(zip(h.reached[: self.kmax], h.accepted)):
                st.reached[i] += f * r
                st.accepted[i] += f * min(a, r)
            if 0 <= h.lookahead <= self.kmax and h.steps > 0:
                st.weight[h.lookahead] += f * h.steps
                st.draft[h.lookahead] += f * h.draft_seconds
                st.verify[h.lookahead] += f * h.verify_seconds
        if any(st.weight):
            self._refresh(st, True)
        return self

    def prediction(self, domain: str) -> Prediction | None:
        """The latest fit of ``domain`` (None before the first)."""
        st = self._domains.get(domain)
        return st.pred if st else None

    def reset(self, domain: str) -> "ModelBased":
        """Forget ``domain`` (e.g. after a drift alert): it starts again with a warmup."""
        self._domains.pop(domain, None)
        return self

    def forget(self, domain: str) -> "ModelBased":
        self._domains.pop(domain, None)  # a fit in flight checks its state is still the domain's
        return self

    def __repr__(self) -> str:
        return (f"ModelBased(kmax={self.kmax}, seed={self.seed}, halflife={self.halflife:g}, "
                f"refit_every={self.refit_every}, explore={self.explore:g})")


def _rate(x: float) -> str:
    return f"{x:.0f}" if x >= 100 else f"{x:.3g}"
