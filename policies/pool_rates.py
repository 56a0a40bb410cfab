"""What a domain's steps draft and get accepted on each pool: per (domain, pool) discounted sums, predicted
for every pair, so a domain measured on one pool is predicted on the others.

Drafted tokens per step depend on the domain (copy-heavy prompts give llama.cpp's n-gram lookup long
matches, open chat few) and on the pool. Pools come in two families, told apart by what they draft: a pool
whose steps draft their K (a draft model run at a fixed K: ``FULL`` of K x steps or more) drafts its K in
every domain; a pool whose K is a cap (n-gram self-speculation drafts 0..K a step) drafts the domain's level
times the pool's (``two_way``, fitted over the capped pools' cells). Accepted tokens per step are Leviathan's
accepted length a (1 - a^D) / (1 - a) at those D drafted tokens (arXiv 2211.17192), with the domain's
per-token acceptance a in that family backed out of its requests on every pool of the family: how much a
longer cap adds depends on how often the domain's drafted tokens hold (a copy of long exact runs gains
from k64, long matches of which few tokens hold lose by it), which a multiplicative model of accepted
tokens learnt from other domains cannot tell. A cell's own measurement is weighed against that prediction
by their precisions (``combine``): a cell measured over a few requests keeps its own figures, a cell never
measured the model's; a new domain starts as the typical one, ``domain_spread`` uncertain, until its
first requests place it.

Sums fade per request of the domain (``halflife``): a pool the domain stopped using falls back to the model
and grows uncertain, so it is measured again when it might pay. A request whose accepted tokens per step
lie more than ``jump`` spreads from its cell's is a change (a target update, a stale draft): the domain's
evidence is cut to a tenth, and to a request's worth at most, at once (``cut``). Spreads are relative to 1 + the rate (a step emits
1 + accepted tokens), learnt per domain from the requests' deviations from their cells (copy-heavy prompts
vary far more from request to request than chat), pulled toward every domain's.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from policies.goodput import backed_out_acceptance, leviathan_tokens
from policies.two_way import combine, two_way

KEEP_AFTER_CHANGE = 0.1  # share of a domain's evidence kept after a jump or a version change ...
KEEP_REQUESTS = 1.0  # ... and at most this many requests' worth of it
FULL = 0.9  # a pool drafting at least this share of K x steps drafts its K: Leviathan's model applies
REQUESTS, STEPS, ACCEPTED, DRAFTED = range(4)  # the sums kept per (domain, pool)
SPREAD_PRIOR, SPREAD_PRIOR_WEIGHT = 0.3, 4.0  # a request's relative spread before any is measured
SPREAD_HALFLIFE = 200.0  # requests of all domains


class Rates(NamedTuple):
    """Predicted accepted and drafted tokens per step of one (domain, pool), with standard errors."""

    accepted: float
    accepted_se: float
    drafted: float
    drafted_se: float
    requests: float  # the cell's own discounted requests behind it


class RateTable:
    """Per (domain, pool K > 0) discounted requests, steps, accepted and drafted tokens, and predictions.

    ``cell_spread``: how far a (domain, pool) strays from its family's model, relative; ``domain_spread``:
    how far a new domain strays from the typical one (shrinking as the domain is measured).
    """

    def __init__(self, halflife: float, cell_spread: float, domain_spread: float, jump: float, sweeps: int = 3):
        self.gamma = math.exp2(-1.0 / halflife)
        self.cell_spread, self.domain_spread, self.jump, self.sweeps = cell_spread, domain_spread, jump, sweeps
        self._index: dict[str, int] = {}
        self._free: list[int] = []
        self._ks: list[int] = []  # column -> K
        self._sums = np.zeros((4, 4, 4))  # (row, REQUESTS..DRAFTED, column)
        self._requests = np.zeros(4)  # per row: discounted requests of the domain on any pool, off too
        self._used = 0  # rows ever handed out (the fits read rows[:used])
        self._drafting = (np.ones(4), np.full(4, np.nan))  # capped pools' two-way fit: domain, pool levels
        self._full = np.zeros(0, dtype=bool)  # per column: the pool drafts its K
        # Squared deviations of requests from their cells (accepted, drafted) and their weight: every domain's,
        # the prior of each domain's own.
        self._deviations = np.zeros(3)
        self._domain_deviations = np.zeros((4, 3))
        self._spread_gamma = math.exp2(-1.0 / SPREAD_HALFLIFE)
        self._memo: dict[int | None, dict[int, Rates]] = {}  # row -> predictions, until the next write

    # -- reads ----------------------------------------------------------------------------------------
    def evidence(self, domain: str) -> float:
        """The domain's discounted requests on any pool (0: nothing known of it)."""
        row = self._index.get(domain)
        return 0.0 if row is None else float(self._requests[row])

    def _spread(self, what: int, row: int | None) -> float:
        """Relative spread of one request's accepted (``ACCEPTED``) or drafted (``DRAFTED``) tokens per step
        around its cell's: every domain's (``row`` None) or one domain's, pulled toward every domain's."""
        i = what - ACCEPTED
        every = math.sqrt((self._deviations[i] + SPREAD_PRIOR_WEIGHT * SPREAD_PRIOR ** 2)
                          / (self._deviations[2] + SPREAD_PRIOR_WEIGHT))
        if row is None:
            return every
        own = self._domain_deviations[row]
        return math.sqrt((own[i] + SPREAD_PRIOR_WEIGHT * every ** 2) / (own[2] + SPREAD_PRIOR_WEIGHT))

    def predict(self, domain: str, k: int) -> Rates | None:
        """Accepted and drafted tokens per step of ``domain`` on pool ``k`` (None: no domain measured it)."""
        return self.predict_all(domain).get(k)

    def predict_all(self, domain: str) -> dict[int, Rates]:
        """``predict`` for every pool some domain measured, by K (computed once per domain between writes:
        the proxy asks before every request)."""
        row = self._index.get(domain)
        found = self._memo.get(row)
        if found is None:
            found = self._memo[row] = self._predict_all(row)
        return found

    def _predict_all(self, row: int | None) -> dict[int, Rates]:
        used, n = self._used, len(self._ks)
        sums = self._sums[:used, :, :n]
        totals = sums.sum(axis=0)
        cells = self._sums[row, :, :n] if row is not None else np.zeros_like(totals)
        level = 1.0 if row is None else float(self._drafting[0][row])
        families = {}
        for full in (False, True):
            family = self._full == full
            if family.any():
                acceptance = self._acceptance(cells[:, family], totals[:, family], float(sums[:, REQUESTS][:, family].sum()))
                requests = float(cells[REQUESTS, family].sum())
                families[full] = (acceptance, self.cell_spread ** 2 + self.domain_spread ** 2 / (1.0 + requests))
        spreads = (self._spread(ACCEPTED, row), self._spread(DRAFTED, row))
        # Plain floats from here: a handful of pools, and numpy's per-element overhead would dominate.
        total_steps, total_drafted = totals[STEPS].tolist(), totals[DRAFTED].tolist()
        own_cells, pools, fulls = cells.T.tolist(), self._drafting[1][:n].tolist(), self._full.tolist()
        out = {}
        for k, steps, drafted_all, own_cell, pool, full in zip(self._ks, total_steps, total_drafted, own_cells,
                                                              pools, fulls):
            if not steps > 0:
                continue
            acceptance, model_rel = families[full]
            depth = min(drafted_all / steps if full else level * pool, float(k))
            own_requests, own_steps = own_cell[REQUESTS], own_cell[STEPS]
            estimates = []
            for spread, what, model in ((spreads[0], ACCEPTED, leviathan_tokens(acceptance, depth) - 1.0),
                                        (spreads[1], DRAFTED, depth)):
                own, own_var = 0.0, math.inf
                if own_requests > 0 and own_steps > 0:
                    own = own_cell[what] / own_steps
                    own_var = (spread * (1.0 + own)) ** 2 / own_requests
                mean, var = combine(own, own_var, model, model_rel * (1.0 + model) ** 2)
                estimates += [mean, math.sqrt(var)]
            drafted = min(estimates[2], float(k))
            out[k] = Rates(min(estimates[0], drafted), estimates[1], drafted, estimates[3], own_requests)
        return out

    @staticmethod
    def _acceptance(own: np.ndarray, every: np.ndarray, requests: float) -> float:
        """Per-token acceptance of a domain's cells in one family (Leviathan's accepted length at each cell's
        drafted tokens per step, backed out), with every domain's cells as one request's worth (a new domain
        starts from the others', 0.5 with none)."""
        sums = own + every / max(requests, 1.0)
        steps = sums[STEPS]
        depth = np.divide(sums[DRAFTED], steps, out=np.zeros_like(steps), where=steps > 0)
        a = backed_out_acceptance(steps.tolist(), sums[ACCEPTED].tolist(), depth.tolist())
        return 0.5 if a is None else a

    # -- writes ---------------------------------------------------------------------------------------
    def add(self, domain: str, k: int, steps: float, accepted: float, drafted: float) -> bool:
        """One request of ``domain`` on pool ``k`` (K = 0 counts as evidence of the domain only); True when
        its acceptance was a change, and the domain's older evidence was cut."""
        self._memo.clear()
        row = self._row(domain)
        self._sums[row] *= self.gamma
        self._requests[row] = self._requests[row] * self.gamma + 1.0
        if k <= 0:
            return False
        col = self._col(k)
        cell = self._sums[row, :, col]
        jumped = False
        if cell[REQUESTS] >= 1.0 and cell[STEPS] > 0:
            scale = 1.0 + 1.0 / float(cell[REQUESTS])  # the cell's mean is itself uncertain
            squares = np.zeros(3)
            for i, (what, value) in enumerate(((ACCEPTED, accepted), (DRAFTED, drafted))):
                mean = float(cell[what] / cell[STEPS])
                deviation = (value / steps - mean) / (1.0 + mean)
                limit = self.jump * self._spread(what, row)
                jumped = jumped or (what == ACCEPTED and deviation * deviation > limit * limit * scale)
                squares[i] = min(deviation * deviation / scale, limit * limit)  # one outlier moves it little
            squares[2] = 1.0
            self._deviations = self._deviations * self._spread_gamma + squares
            self._domain_deviations[row] = self._domain_deviations[row] * self._spread_gamma + squares
        if jumped:
            self.cut(domain)
        self._sums[row, :, col] += (1.0, steps, accepted, drafted)
        self._refit()
        return jumped

    def seed(self, domain: str, k: int, requests: float, steps: float, accepted: float, drafted: float) -> None:
        """Stored totals (a warm start) as ``requests`` requests of the domain, not discounted."""
        self._memo.clear()
        row = self._row(domain)
        self._requests[row] += requests
        if k > 0 and steps > 0:
            self._sums[row, :, self._col(k)] += (requests, steps, accepted, drafted)
            self._refit()

    def cut(self, domain: str | None = None) -> None:
        """A change (a jump; a model version change: every domain, ``domain`` None): each domain's evidence
        keeps ``KEEP_AFTER_CHANGE`` of its weight and at most ``KEEP_REQUESTS`` requests' worth, the same means
        less sure, so the new figures outweigh the old from the next request on whatever the halflife."""
        self._memo.clear()
        rows = range(self._used) if domain is None else [self._index[domain]] if domain in self._index else []
        for row in rows:
            held = float(self._sums[row, REQUESTS].sum())
            factor = min(KEEP_AFTER_CHANGE, KEEP_REQUESTS / held) if held > 0 else KEEP_AFTER_CHANGE
            self._sums[row] *= factor
            self._requests[row] *= factor

    def forget(self, domain: str) -> None:
        self._memo.clear()
        row = self._index.pop(domain, None)
        if row is not None:
            self._sums[row] = 0.0
            self._requests[row] = 0.0
            self._domain_deviations[row] = 0.0
            self._free.append(row)
            self._refit()

    # -- internals ------------------------------------------------------------------------------------
    def _row(self, domain: str) -> int:
        row = self._index.get(domain)
        if row is None:
            if self._free:
                row = self._free.pop()
            else:
                row, self._used = self._used, self._used + 1
                if row >= self._sums.shape[0]:
                    self._grow(rows=2 * self._sums.shape[0])
            self._index[domain] = row
        return row

    def _col(self, k: int) -> int:
        if k not in self._ks:
            self._ks.append(k)
            if len(self._ks) > self._sums.shape[2]:
                self._grow(cols=2 * self._sums.shape[2])
        return self._ks.index(k)

    def _grow(self, rows: int | None = None, cols: int | None = None) -> None:
        old = self._sums
        rows, cols = rows or old.shape[0], cols or old.shape[2]
        self._sums = np.zeros((rows, 4, cols))
        self._sums[:old.shape[0], :, :old.shape[2]] = old
        self._requests = np.concatenate([self._requests, np.zeros(rows - len(self._requests))])
        self._domain_deviations = np.concatenate([self._domain_deviations,
                                                  np.zeros((rows - len(self._domain_deviations), 3))])
        levels, pools = self._drafting
        self._drafting = (np.concatenate([levels, np.ones(rows - len(levels))]),
                          np.concatenate([pools, np.full(cols - len(pools), np.nan)]))

    def _refit(self) -> None:
        """Which pools draft their K, and a few sweeps of the capped pools' two-way fits from the last ones
        (a request changes the sums a little)."""
        used, n = self._used, len(self._ks)
        totals = self._sums[:used, :, :n].sum(axis=0)
        capacity = totals[STEPS] * np.array(self._ks, dtype=float)
        self._full = (capacity > 0) & (totals[DRAFTED] >= FULL * capacity)
        steps = np.where(self._full, 0.0, self._sums[:used, STEPS, :n])
        levels, pools = self._drafting
        rows, cols = two_way(steps, self._sums[:used, DRAFTED, :n], levels[:used], self.sweeps)
        levels[:used] = rows
        pools[:n] = cols
