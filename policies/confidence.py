"""Early stop inside a step: the draft's confidence in each token it drafts decides whether to draft more.

Two rules, per domain, fitted on logged (confidence, accepted) pairs; only positions up to and including
the first rejection give pairs (later drafted tokens were never verified).

``rule="gain"`` (SpecDec++, arXiv 2405.19715): isotonic regression calibrates P(accept | confidence); in a
step the running product P_all(j) = prod_{i<=j} p_i is the chance that every token drafted so far is
accepted, and drafting stops after token j once the expected gain of one more token, P_all(j) times the
acceptance at position j + 1, is worth less than its marginal cost at the current goodput
(``goodput.stop_limits``). Costs come from the base policy's fitted step seconds when it has them
(``ModelBased.prediction``). Once fitted, a step drafts up to kmax whenever the base speculates (the stop,
not K, ends it), and speculation is vetoed where steps drafted under the stop measurably earn less than
plain steps. A calibration that stops matching new pairs (the target changed) is refitted at once on them
(their pooled acceptance: no isotonic fit, cheap enough for the step that finds the change).

``rule="roc"``: stop below a confidence threshold minimising fpr + w fnr over the ROC curve, as
transformers' assisted generation re-fits ``assistant_confidence_threshold`` (w = 3, start 0.4); a
classifier deciding per token whether to keep drafting is DISCO (arXiv 2405.04304). ``weight=None``
derives w from measured costs (``goodput.stop_weight``). The lookahead is the base policy's.

Fits (isotonic calibration, ROC threshold) run in ``refit``, the sidecar's scheduler job, not in
``update``, which only marks a domain due; as in ``ModelBased``, update fits inline until refit is first
called or once ``overdue`` updates pass without one.
"""

from __future__ import annotations

import math
from itertools import repeat
from typing import Any, Callable, Sequence

from policies import fit
from policies.base import ArmStats, Decision, Outcome, Policy, StopDrafting, StopState
from policies.confidence_state import _FRESH, DomainState as _Domain, stop_rule, surprise_point
from policies.goodput import marginal_seconds, stop_limits, stop_weight

RULES = ("gain", "roc")
class ConfidenceStop(Policy):
    """The base policy's lookahead (kmax when there is no base), with a fitted confidence stop.

    ``rule``: "gain" (expected gain against marginal cost) or "roc" (a confidence threshold); see the
    module doc. ``weight``: w in fpr + w fnr of the roc rule (None derives it from measured costs).
    ``threshold``: the confidence threshold used until a rule is fitted (0.4 as transformers).
    ``window``: most recent pairs kept per domain, so the fits follow a changed target.
    ``min_pairs``: pairs needed for a fit. ``refit_every``: steps of a domain between fits (500: the
    window turns over about as often; a fit costs a few ms). ``halflife``: steps, for the decayed goodput
    and cost sums (for the veto's sums: steps drafted under the stop). ``bins``: resolution of the gain
    rule's calibration table. ``surprise``: standard deviations between the accepted count of pairs since
    the fit and its calibrated expectation that trigger an immediate refit on those pairs alone.
    ``explore``: probability that a vetoed step probes (drafts under the stop) anyway. ``min_steps``:
    steps drafted under the stop before a veto. ``overdue``: updates (all domains) without a ``refit`` call
    after which update fits inline again.
    With the stop on, a record's lookahead is the number of tokens actually drafted.
    """

    name = "confidence-stop"

    def __init__(self, base: Policy | None = None, kmax: int = 8, seed: int | None = None, *,
                 rule: str = "gain", weight: float | None = 3.0, threshold: float = 0.4, window: int = 2048,
                 min_pairs: int = 200, refit_every: int = 500, halflife: float = 300.0, bins: int = 1000,
                 surprise: float = 5.0, explore: float = 0.05, min_steps: int = 20, overdue: int = 100_000):
        super().__init__(base.kmax if base is not None else kmax, seed)
        if rule not in RULES:
            raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
        if weight is not None and not weight > 0:
            raise ValueError(f"weight must be positive or None (derive from costs), got {weight!r}")
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {threshold!r}")
        for label, value in (("window", window), ("min_pairs", min_pairs), ("refit_every", refit_every),
                             ("bins", bins), ("overdue", overdue)):
            if type(value) is not int or value < 1:
                raise ValueError(f"{label} must be an integer >= 1, got {value!r}")
        if min_pairs > window:
            raise ValueError(f"min_pairs ({min_pairs}) must not exceed window ({window})")
        for label, value in (("halflife", halflife), ("surprise", surprise)):
            if not value > 0:
                raise ValueError(f"{label} must be positive, got {value!r}")
        if not 0.0 <= explore < 1.0:
            raise ValueError(f"explore must be in [0, 1), got {explore!r}")
        if type(min_steps) is not int or min_steps < 0:
            raise ValueError(f"min_steps must be an integer >= 0, got {min_steps!r}")
        self.base, self.rule, self.weight, self.threshold = base, rule, weight, threshold
        self.window, self.min_pairs, self.refit_every = window, min_pairs, refit_every
        self.halflife, self.bins, self.surprise = float(halflife), bins, surprise
        self.explore, self.min_steps, self.overdue = explore, min_steps, overdue
        self._decay = 0.5 ** (1.0 / self.halflife)
        self._since_refit = math.inf  # updates since refit() last ran; over ``overdue``: fit inline
        predict = getattr(base, "prediction", None)
        self._predict = predict if callable(predict) else None
        self._domains: dict[str, _Domain] = {}

    def choose(self, domain: str) -> Decision:
        st = self._domains.get(domain) or self._new(domain)
        inner = self.base.choose(domain) if self.base is not None else None
        if st.limits is not None and inner is not None and inner.lookahead > 0:
            veto = self._veto(domain, st)
            if veto is not None:
                return veto
        # Base policies hand back the same few Decision objects between refits; reuse ours then.
        cached = st.cache.get(id(inner))
        if cached is not None and cached[0] is inner:
            return cached[1]
        k = inner.lookahead if inner is not None else self.kmax
        head = inner.reason if inner is not None else f"K={k} (no base policy)"
        if st.limits is None:
            out = self.decision(k, f"{head}; stop drafting below confidence {st.threshold:.2f}")
        else:
            # The base's K came from acceptance curves without the stop; with it, the stop ends the step.
            k = self.kmax if k > 0 else 0
            out = self.decision(k, f"{head}; draft up to K={k}, stop when P(all accepted) x next acceptance "
                                   f"< {st.cost:.2f} (a drafted token's cost in tokens)")
        if len(st.cache) >= 8:  # a base hands out a handful at a time; older ones are gone
            st.cache.clear()
        st.cache[id(inner)] = (inner, out)
        return out

    def _veto(self, domain: str, st: _Domain) -> Decision | None:
        """K = 0 where steps drafted under the stop earn less than plain steps though the base speculates:
        its acceptance curves see only the confident chains the stop lets through to later positions, so
        they are optimistic. A probe at rate ``explore`` keeps the comparison current. None: no veto."""
        count, emitted, seconds = st.spec
        pred = self._prediction(domain) if count >= self.min_steps else None
        if pred is None or emitted >= seconds * pred.goodput[0]:
            return None
        rate, plain = emitted / seconds, pred.goodput[0]
        if self._rng.random() < self.explore:
            return self.decision(self.kmax, f"probe: K={self.kmax} with the stop ({rate:.0f} tok/s) against "
                                            f"plain steps ({plain:.0f} tok/s)")
        return self.decision(0, f"off: drafting with the stop gives {rate:.0f} tok/s, plain steps "
                                f"{plain:.0f} tok/s")

    def update(self, domain: str, outcome: Outcome) -> "ConfidenceStop":
        if self.base is not None:
            self.base.update(domain, outcome)
        self._since_refit += 1
        st = self._domains.get(domain) or self._new(domain)
        st.steps += 1
        conf, k, acc = outcome.draft_confidence, outcome.lookahead, outcome.accepted
        if conf:
            n = min(len(conf), k, acc + 1)
            if n:
                st.conf.extend(conf[:n])
                st.pos.extend(range(n))
                if acc >= n:
                    st.acc.extend(repeat(1, n))
                else:  # n == acc + 1: the accepted ones, then the rejected token
                    st.acc.extend(repeat(1, acc))
                    st.acc.append(0)
                if st.since is not None and st.table is not None:
                    self._watch(domain, st, conf, n, acc)
        g, s = self._decay, st.sums
        if k > 0 and st.limits is not None:  # a step drafted under the fitted gain rule
            p = st.spec
            p[0], p[1], p[2] = p[0] * g + outcome.steps, p[1] * g + outcome.emitted, p[2] * g + outcome.seconds
        s[0] = s[0] * g + outcome.draft_seconds
        s[1] = s[1] * g + outcome.drafted
        s[2] = s[2] * g + outcome.emitted
        s[3] = s[3] * g + outcome.seconds
        if st.steps >= st.next_fit:
            if self._since_refit > self.overdue or len(st.acc) < self.min_pairs:
                self._refit(domain, st)  # no scheduler, or nothing to fit yet (only reschedules)
            else:
                st.due = True
        return self

    def _watch(self, domain: str, st: _Domain, conf: Sequence[float], n: int, acc: int) -> None:
        """Check the calibration on the pairs logged since its fit: when their accepted count strays from
        the calibrated expectation by over ``surprise`` standard deviations (the target changed), forget
        the pairs before the change and refit on the new ones rather than mix two targets in one window."""
        at = surprise_point(st.since, st.lookup, self.bins, conf, n, acc, self.surprise)
        if at is None:
            return
        for _ in range(len(st.acc) - (st.since[0] - at)):  # forget the pairs before the change
            st.conf.popleft()
            st.acc.popleft()
            st.pos.popleft()
        st.spec = [0.0, 0.0, 0.0]  # what drafting under the old target earned is stale too
        st.epoch += 1
        self._refit(domain, st, quick=True)

    # -- fits ----------------------------------------------------------------------------------------
    def refit(self) -> "ConfidenceStop":
        """Run every due fit now (single-threaded callers; see ``prepare_refit``)."""
        self.prepare_refit()()()
        return self

    def prepare_refit(self) -> Callable[[], Callable[[], None]]:
        """Copy what the due fits need (call under the lock that guards the policy; the base's too).
        Returns ``compute``: the fits on those copies, touching nothing shared (call without the lock),
        which returns ``apply``: swaps the results in (call under the lock)."""
        self._since_refit = 0
        prepare = getattr(self.base, "prepare_refit", None)
        base = prepare() if callable(prepare) else None
        jobs = []
        for domain, st in self._domains.items():
            if st.due:
                st.due = False
                plan = self._plan(domain, st)
                if plan is not None:
                    jobs.append((domain, st, st.epoch, plan))

        def compute() -> Callable[[], None]:
            base_apply = base() if base is not None else None
            results = [(domain, st, epoch, self._fit(plan)) for domain, st, epoch, plan in jobs]

            def apply() -> None:
                if base_apply is not None:
                    base_apply()
                for domain, st, epoch, result in results:
                    # Not if the domain was forgotten or its window cut at a changed target meanwhile.
                    if self._domains.get(domain) is st and st.epoch == epoch:
                        self._install(st, result)
            return apply
        return compute

    def _refit(self, domain: str, st: _Domain, quick: bool = False) -> None:
        """Fit the rule on the window now; ``quick`` (after a surprise) fits the gain rule on the few pairs
        left, with their pooled acceptance standing in for the calibration until ``min_pairs`` are in."""
        st.due = False
        plan = self._plan(domain, st, quick)
        if plan is not None:
            self._install(st, self._fit(plan))

    def _plan(self, domain: str, st: _Domain, quick: bool = False) -> tuple | None:
        """Schedule the next fit and copy what this one needs (cheap); None when there is nothing to fit."""
        full = len(st.acc) >= self.min_pairs
        st.next_fit = st.steps + (self.refit_every if full else max(1, self.refit_every // 10))
        if not (full or quick):
            return None
        if self.rule == "gain":
            rate = st.sums[2] / st.sums[3] if st.sums[3] > 0 else 0.0
            pooled = None if full else sum(st.acc) / len(st.acc)
            return "gain", list(st.conf), list(st.acc), list(st.pos), pooled, self._marginal(domain, st), rate
        w = self.weight if self.weight is not None else self._cost_weight(st)
        return None if w is None else ("roc", list(st.conf), list(st.acc), w)

    def _fit(self, plan: tuple) -> tuple:
        """The fit itself, from a plan alone (no state read or written): safe outside any lock."""
        if plan[0] == "roc":
            _, conf, acc, w = plan
            return "roc", fit.roc_threshold(conf, acc, w)
        _, conf, acc, pos, pooled, marginal, rate = plan
        table = fit.calibration_table(conf, acc, self.bins) if pooled is None else [pooled] * self.bins
        limits = stop_limits(fit.position_rates(pos, acc, self.kmax), marginal, rate)
        padded = table + table[-1:]
        lookup = padded, [p * (1.0 - p) for p in padded]
        return "gain", table, limits, marginal * rate, pooled is None, lookup

    @staticmethod
    def _install(st: _Domain, result: tuple[Any, ...]) -> None:
        if result[0] == "roc":
            if result[1] is None:  # one class only: no threshold is identifiable
                return
            st.threshold = result[1]
        else:
            _, st.table, st.limits, st.cost, full, st.lookup = result
            st.since = list(_FRESH) if full else None
        st.fits += 1
        st.cache = {}  # the reasons quote the fit

    def _prediction(self, domain: str):
        """The base's latest fit if it has step seconds and goodput by K (as ``ModelBased.prediction``)."""
        pred = self._predict(domain) if self._predict is not None else None
        return pred if len(getattr(pred, "seconds", ())) > 2 else None

    def _marginal(self, domain: str, st: _Domain) -> float:
        """Seconds per extra drafted token: from the base's fitted step seconds by K when it has them (a
        draft forward plus the wider verify pass), else our own draft seconds per drafted token."""
        pred = self._prediction(domain)
        if pred is not None:
            return marginal_seconds(pred.seconds)
        return st.sums[0] / st.sums[1] if st.sums[1] > 0 else 0.0

    def cost_weight(self, domain: str) -> float | None:
        """w derived from ``domain``'s measured costs (None until drafted tokens have been seen)."""
        st = self._domains.get(domain)
        return self._cost_weight(st) if st else None

    @staticmethod
    def _cost_weight(st: _Domain) -> float | None:
        draft_s, drafted, emitted, seconds = st.sums
        if drafted <= 0 or emitted <= 0 or not st.acc:
            return None
        accept = sum(st.acc) / len(st.acc)
        return stop_weight(accept, seconds / emitted, draft_s / drafted)

    def stop_drafting(self, domain: str) -> StopDrafting:
        """``(confidence, position) -> bool``: True stops after this token (it is kept and verified). Reads
        the domain's fit at call time, so refits apply; a base's own stop rule also stops. The gain rule's
        callable carries P_all through a step (position 1 starts one): take one per generation."""
        st = self._domains.get(domain) or self._new(domain)
        inner = self.base.stop_drafting(domain) if self.base is not None else None
        own = stop_rule(st, self.rule, self.bins)
        if inner is None:
            return own
        return lambda confidence, position: own(confidence, position) or inner(confidence, position)

    def stop_state(self, domain: str) -> StopState:
        """What ``stop_drafting`` reads, for a decoder in another process (agent/ring/client.py)."""
        st = self._domains.get(domain) or self._new(domain)
        return StopState(self.rule, self.bins, st.threshold, st.table, st.limits)

    def reconsider(self) -> "ConfidenceStop":
        """Forget what drafting under the stop earned (the veto's evidence) in every domain: it was measured
        with the old models, and with a veto in force it would otherwise fade only over hundreds of probes."""
        for st in self._domains.values():
            st.spec = [0.0, 0.0, 0.0]
        if self.base is not None:
            self.base.reconsider()
        return self

    def warm_start(self, domain: str, history: Sequence[ArmStats]) -> "ConfidenceStop":
        """Forwarded to the base policy (stored totals hold no confidence pairs)."""
        if self.base is not None:
            self.base.warm_start(domain, history)
        return self

    def threshold_of(self, domain: str) -> float:
        """The current confidence threshold of ``domain`` (the roc rule, or any rule before its first fit)."""
        st = self._domains.get(domain)
        return st.threshold if st else self.threshold

    def limits_of(self, domain: str) -> list[float] | None:
        """The gain rule's stop limits on P_all per drafted position (index = position), None until fitted."""
        st = self._domains.get(domain)
        return list(st.limits) if st and st.limits else None

    def acceptance(self, domain: str, confidence: float) -> float | None:
        """The gain rule's calibrated P(accept | confidence) in ``domain``, None until fitted."""
        st = self._domains.get(domain)
        if not (st and st.table):
            return None
        return st.table[min(max(int(confidence * self.bins), 0), self.bins - 1)]

    def _new(self, domain: str) -> _Domain:
        st = self._domains[domain] = _Domain(self.window, self.threshold, max(1, self.refit_every // 10))
        return st

    def forget(self, domain: str) -> "ConfidenceStop":
        self._domains.pop(domain, None)  # a fit in flight checks its state is still the domain's
        if self.base is not None:
            self.base.forget(domain)
        return self

    def __repr__(self) -> str:
        return (f"ConfidenceStop({self.base!r}, rule={self.rule!r}, weight={self.weight}, "
                f"window={self.window})")
