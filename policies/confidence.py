"""Early stop inside a step: stop drafting once the draft's own confidence in its token falls below a
per-domain threshold, fitted on logged (confidence, accepted) pairs.

The threshold minimises fpr + w fnr over the ROC curve of confidence as a predictor of acceptance, as
transformers' assisted generation re-fits ``assistant_confidence_threshold`` (w = 3, start 0.4); a
classifier deciding per token whether to keep drafting is DISCO (arXiv 2405.04304), and SpecDec++ (arXiv
2405.19715) shows the optimal stop is a threshold on the chance of a rejection ahead. With ``weight=None``
w is derived from measured costs (``goodput.stop_weight``): the value of an accepted token against the
cost of a wasted draft forward. The lookahead itself comes from a base policy.
"""

from __future__ import annotations

from collections import deque
from typing import Sequence

from policies import fit
from policies.base import ArmStats, Decision, Outcome, Policy, StopDrafting
from policies.goodput import stop_weight


class _Domain:
    __slots__ = ("conf", "acc", "threshold", "steps", "next_fit", "sums", "cache")

    def __init__(self, window: int, threshold: float, first_fit: int):
        self.conf: deque[float] = deque(maxlen=window)
        self.acc: deque[int] = deque(maxlen=window)
        self.threshold, self.steps, self.next_fit = threshold, 0, first_fit
        self.sums = [0.0, 0.0, 0.0, 0.0]  # decayed: draft seconds, drafted tokens, emitted, step seconds
        self.cache: tuple[Decision | None, float, Decision] | None = None


class ConfidenceStop(Policy):
    """The base policy's lookahead (kmax when there is no base), with a fitted confidence stop.

    ``weight``: w in fpr + w fnr (3 as transformers; None derives it from measured costs).
    ``threshold``: used until ``min_pairs`` pairs holding both outcomes are logged (0.4 as transformers).
    ``window``: most recent pairs kept per domain, so the threshold follows a changed target.
    ``refit_every``: steps of a domain between fits (500: the window turns over about as often, and a fit
    costs ~2 ms). ``halflife``: steps, for the decayed cost sums behind a cost-derived w.
    Only positions up to and including the first rejection give pairs (later tokens were never verified).
    With the stop on, a record's lookahead is the number of tokens actually drafted.
    """

    name = "confidence-stop"

    def __init__(self, base: Policy | None = None, kmax: int = 8, seed: int | None = None, *,
                 weight: float | None = 3.0, threshold: float = 0.4, window: int = 2048,
                 min_pairs: int = 200, refit_every: int = 500, halflife: float = 300.0):
        super().__init__(base.kmax if base is not None else kmax, seed)
        if weight is not None and not weight > 0:
            raise ValueError(f"weight must be positive or None (derive from costs), got {weight!r}")
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {threshold!r}")
        for label, value in (("window", window), ("min_pairs", min_pairs), ("refit_every", refit_every)):
            if type(value) is not int or value < 1:
                raise ValueError(f"{label} must be an integer >= 1, got {value!r}")
        if min_pairs > window:
            raise ValueError(f"min_pairs ({min_pairs}) must not exceed window ({window})")
        if not halflife > 0:
            raise ValueError(f"halflife must be positive, got {halflife!r}")
        self.base, self.weight, self.threshold, self.window = base, weight, threshold, window
        self.min_pairs, self.refit_every, self.halflife = min_pairs, refit_every, float(halflife)
        self._decay = 0.5 ** (1.0 / self.halflife)
        self._domains: dict[str, _Domain] = {}

    def choose(self, domain: str) -> Decision:
        st = self._domains.get(domain) or self._new(domain)
        inner = self.base.choose(domain) if self.base is not None else None
        cached = st.cache
        # Base policies hand back the same Decision object between refits; reuse ours then.
        if cached is not None and cached[0] is inner and cached[1] == st.threshold:
            return cached[2]
        k = inner.lookahead if inner is not None else self.kmax
        head = inner.reason if inner is not None else f"K={k} (no base policy)"
        out = self.decision(k, f"{head}; stop drafting below confidence {st.threshold:.2f}")
        st.cache = (inner, st.threshold, out)
        return out

    def update(self, domain: str, outcome: Outcome) -> "ConfidenceStop":
        if self.base is not None:
            self.base.update(domain, outcome)
        st = self._domains.get(domain) or self._new(domain)
        st.steps += 1
        conf, k, acc = outcome.draft_confidence, outcome.lookahead, outcome.accepted
        if conf:
            append_c, append_a = st.conf.append, st.acc.append
            for i in range(min(len(conf), k, acc + 1)):
                append_c(conf[i])
                append_a(1 if i < acc else 0)
        g, s = self._decay, st.sums
        s[0] = s[0] * g + outcome.draft_seconds
        s[1] = s[1] * g + k
        s[2] = s[2] * g + outcome.emitted
        s[3] = s[3] * g + outcome.seconds
        if st.steps >= st.next_fit:
            self._refit(st)
        return self

    def _refit(self, st: _Domain) -> None:
        if len(st.acc) < self.min_pairs:
            st.next_fit = st.steps + max(1, self.refit_every // 10)  # first fit soon after min_pairs
            return
        st.next_fit = st.steps + self.refit_every
        w = self.weight if self.weight is not None else self._cost_weight(st)
        if w is None:
            return
        t = fit.roc_threshold(st.conf, st.acc, w)
        if t is not None:
            st.threshold = t

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
        """``(confidence, position) -> bool``: True stops after this token (it is kept and verified).
        Reads the domain's threshold at call time, so later refits apply; a base policy's own stop rule,
        if any, also stops."""
        st = self._domains.get(domain) or self._new(domain)
        inner = self.base.stop_drafting(domain) if self.base is not None else None
        if inner is None:
            return lambda confidence, position: confidence < st.threshold
        return lambda confidence, position: confidence < st.threshold or inner(confidence, position)

    def warm_start(self, domain: str, history: Sequence[ArmStats]) -> "ConfidenceStop":
        """Forwarded to the base policy (stored totals hold no confidence pairs)."""
        if self.base is not None:
            self.base.warm_start(domain, history)
        return self

    def threshold_of(self, domain: str) -> float:
        """The current stop threshold of ``domain``."""
        st = self._domains.get(domain)
        return st.threshold if st else self.threshold

    def _new(self, domain: str) -> _Domain:
        st = self._domains[domain] = _Domain(self.window, self.threshold, max(1, self.refit_every // 10))
        return st

    def __repr__(self) -> str:
        return f"ConfidenceStop({self.base!r}, weight={self.weight}, window={self.window})"
