"""Per-domain state of ConfidenceStop, and the check that its calibration still matches new pairs."""

from __future__ import annotations

from collections import deque
from typing import Sequence

from policies.base import Decision, StopDrafting

_FRESH = (0, 0.0, 0.0, 0.0, 0, 0.0, 0.0, 0, 0.0)  # ``_Domain.since`` before any pair


class DomainState:
    __slots__ = ("conf", "acc", "pos", "threshold", "table", "limits", "steps", "next_fit", "sums", "fits",
                 "cost", "since", "spec", "cache", "due", "epoch", "lookup")

    def __init__(self, window: int, threshold: float, first_fit: int):
        self.conf: deque[float] = deque(maxlen=window)
        self.acc: deque[int] = deque(maxlen=window)
        self.pos: deque[int] = deque(maxlen=window)
        self.threshold, self.steps, self.next_fit, self.fits = threshold, 0, first_fit, 0
        self.table: list[float] | None = None  # gain rule: P(accept | confidence bin)
        # gain rule, for the watch: the table and p (1 - p) per bin, one more bin for a confidence of 1
        self.lookup: tuple[list[float], list[float]] | None = None
        self.limits: list[float] | None = None  # gain rule: stop after token j when P_all(j) < limits[j]
        # gain rule, pairs since the fit (None: refit due): count, sum p(1 - p), residual accepted - sum p,
        # its running max and min, each with the count and sum p(1 - p) there
        self.since: list | None = list(_FRESH)
        self.spec = [0.0, 0.0, 0.0]  # gain rule, decayed over steps drafted under it: steps, emitted, seconds
        self.cost = 0.0  # gain rule: marginal seconds of a drafted token x goodput, in tokens
        self.sums = [0.0, 0.0, 0.0, 0.0]  # decayed: draft seconds, drafted tokens, emitted, step seconds
        # ours by the base's Decision (its id; the object is kept alive in the value) for the current fit
        self.cache: dict[int, tuple[Decision | None, Decision]] = {}
        self.due = False  # a fit is due at the next refit()
        self.epoch = 0  # bumped when the window forgets a changed target: fits computed before are stale



def stop_rule(st, rule: str, bins: int) -> StopDrafting:
    """The in-step stop of ConfidenceStop over ``st``'s ``threshold``, ``table`` and ``limits``, read at call
    time (a refit, or a fresh copy from the sidecar, applies at once). ``st``: a DomainState, or any object
    with those attributes (agent/ring/client.py keeps one per domain). The gain rule carries P_all through a
    step (position 1 starts one): one callable per generation."""
    if rule != "gain":
        def threshold_only(confidence: float, position: int) -> bool:
            return confidence < st.threshold
        return threshold_only
    p_all = [1.0]

    def gain(confidence: float, position: int) -> bool:
        table, limits = st.table, st.limits
        if limits is None:
            return confidence < st.threshold
        i = int(confidence * bins)  # a probability: only 1.0 itself falls past the last bin
        p = table[i] if i < bins else table[-1]
        p_all[0] = p if position == 1 else p_all[0] * p
        try:
            return p_all[0] < limits[position]
        except IndexError:  # no position past kmax
            return True
    return gain


def surprise_point(since: list, lookup: tuple[list[float], list[float]], bins: int, conf: Sequence[float], n: int,
                   acc: int, surprise: float) -> int | None:
    """Add one step's pairs (the first ``n`` confidences, ``acc`` of them accepted) to ``since`` (updated in
    place: count, sum p(1 - p), residual accepted - sum p, its running max and min with the count and
    variance there) and run a two-sided CUSUM on the residual: the pair count where the calibration stopped
    holding, or None while it holds within ``surprise`` standard deviations."""
    p_of, var_of = lookup
    count, var, resid, hi, hi_at, hi_var, lo, lo_at, lo_var = since
    bin_of = [int(c * bins) for c in conf[:n]]
    if max(bin_of) > bins:  # a confidence above 1 (never from a validated record): the last bin
        bin_of = [min(j, bins) for j in bin_of]
    # The accepted pairs come first and each raises the residual accepted - sum p (by 1 - p), so its
    # running peak among them is after the last one; then at most one rejected pair lowers it.
    a = acc if acc < n else n
    if a:
        accepted = bin_of[:a]
        count += a
        var += sum(map(var_of.__getitem__, accepted))
        resid += a - sum(map(p_of.__getitem__, accepted))
        if resid > hi:
            hi, hi_at, hi_var = resid, count, var
    if a < n:
        j = bin_of[a]
        count += 1
        var += var_of[j]
        resid -= p_of[j]
        if resid < lo:
            lo, lo_at, lo_var = resid, count, var
    since[:] = count, var, resid, hi, hi_at, hi_var, lo, lo_at, lo_var
    # The pairs after the running residual's peak (trough) are the evidence of a fall (rise).
    limit = surprise * surprise
    gap = resid - hi
    if gap * gap > limit * (var - hi_var + 1.0):
        return hi_at
    gap = resid - lo
    if gap * gap > limit * (var - lo_var + 1.0):
        return lo_at
    return None
