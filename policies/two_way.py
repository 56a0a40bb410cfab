"""Pure estimators behind policies/pool_rates.py: a multiplicative two-way fit of rates over (domain, pool)
cells, and the precision-weighted combination of a cell's own mean with that fit."""

from __future__ import annotations

import numpy as np


def two_way(exposure: np.ndarray, counts: np.ndarray, rows: np.ndarray | None = None,
            sweeps: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """``(row, col)`` effects with counts[d, p] ~ exposure[d, p] * row[d] * col[p]: the Poisson maximum
    likelihood of a rate that is a domain's level times a pool's, by iterative proportional fitting
    (each sweep sets every col, then every row, to its margins' ratio; from ``rows``, a warm start, a few
    sweeps follow a small change).

    Rows are scaled to a mean of 1 over the rows with any exposure, so a row without any (a new domain) is
    the typical one, 1; cols without exposure (a pool nothing measured) are NaN.
    """
    exposure = np.asarray(exposure, dtype=float)
    counts = np.where(exposure > 0, np.asarray(counts, dtype=float), 0.0)  # a count without exposure says nothing
    n_rows, n_cols = exposure.shape
    seen_rows = exposure.sum(axis=1) > 0
    seen_cols = exposure.sum(axis=0) > 0
    row = np.ones(n_rows) if rows is None or len(rows) != n_rows else np.array(rows, dtype=float)
    row[~seen_rows] = 1.0
    col = np.full(n_cols, np.nan)
    if not seen_cols.any():
        return np.ones(n_rows), col
    row_counts, col_counts = counts.sum(axis=1), counts[:, seen_cols].sum(axis=0)
    e = exposure[:, seen_cols]
    for _ in range(sweeps):
        c = _ratio(col_counts, row @ e, 0.0)
        row = np.where(seen_rows, _ratio(row_counts, e @ c, 1.0), 1.0)  # a row of pools that never accepted: 1
    mean = row[seen_rows].mean()
    if mean > 0:
        row = np.where(seen_rows, row / mean, 1.0)
    c = _ratio(col_counts, row @ e, 0.0)
    col[seen_cols] = c
    return row, col


def _ratio(num: np.ndarray, den: np.ndarray, otherwise: float) -> np.ndarray:
    return np.divide(num, den, out=np.full(len(num), otherwise), where=den > 0)


def combine(own: float, own_var: float, prior: float, prior_var: float) -> tuple[float, float]:
    """``(mean, variance)`` of a measurement and a prior weighted by their precisions (a normal prior's
    posterior): a well-measured cell keeps its own mean, an unmeasured one (own_var = inf) the prior."""
    if not own_var < float("inf"):
        return prior, prior_var
    if not prior_var > 0:
        return prior, 0.0
    if not own_var > 0:
        return own, 0.0
    w_own, w_prior = 1.0 / own_var, 1.0 / prior_var
    total = w_own + w_prior
    return (w_own * own + w_prior * prior) / total, 1.0 / total
