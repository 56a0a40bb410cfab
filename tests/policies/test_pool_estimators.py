"""The pure estimators behind pool-cap, each against a reference: the cost line against numpy's weighted
least squares, the two-way fit against scikit-learn's Poisson regression, the precision-weighted combination
and the goodput of a capped pool by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.linear_model import PoissonRegressor

from policies.goodput import capped_goodput
from policies.pool_cost import ALPHA_FLOOR, PoolCosts, fit_line
from policies.two_way import combine, two_way


def sums(x, y, w):
    x, y, w = (np.asarray(v, dtype=float) for v in (x, y, w))
    return w.sum(), (w * y).sum(), (w * x).sum(), (w * y * y).sum(), (w * x * x).sum(), (w * x * y).sum()


def test_capped_goodput():
    assert capped_goodput(3.0, 6.0, 0.02, 0.001) == pytest.approx(4.0 / 0.026)
    assert capped_goodput(0.0, 0.0, 0.025, 0.5) == pytest.approx(40.0)  # off: 1 / alpha
    assert capped_goodput(1.0, 1.0, 0.0, 0.0) == 0.0


def test_the_cost_line_is_weighted_least_squares():
    rng = np.random.default_rng(3)
    checked = 0
    for _ in range(50):
        x = rng.uniform(0, 30, 20)
        w = rng.uniform(0.1, 1.0, 20)
        y = 0.02 + 0.0015 * x + rng.normal(0, 0.002, 20)
        line = fit_line(*sums(x, y, w), ridge=1e-12)
        slope, intercept = np.polyfit(x, y, 1, w=np.sqrt(w))  # polyfit weighs residuals, not their squares
        if slope > 0 and intercept > ALPHA_FLOOR * np.average(y, weights=w):
            assert (line.alpha, line.beta) == pytest.approx((intercept, slope), rel=1e-6)
            checked += 1
    assert checked >= 45


def test_the_cost_line_keeps_a_slope_it_cannot_see_at_zero():
    # A pool whose steps always draft its K (a fixed-K draft model): the slope is not identified, the line is
    # flat at the mean, and the prediction there is the measured mean.
    line = fit_line(*sums([4.0] * 5, [0.05, 0.052, 0.048, 0.051, 0.049], [1.0] * 5))
    assert line.beta == 0.0 and line.seconds(4.0) == pytest.approx(0.05)
    # Verifying more never costs less; a step is never free.
    assert fit_line(*sums([1, 2, 3], [0.03, 0.02, 0.01], [1, 1, 1])).beta == 0.0
    steep = fit_line(*sums([10, 20], [0.1, 0.2], [1, 1]))
    assert steep.alpha == pytest.approx(ALPHA_FLOOR * 0.15) and steep.seconds(15) == pytest.approx(0.15)
    assert fit_line(0.0, 0.0, 0.0, 0.0, 0.0, 0.0) is None


def test_the_error_grows_away_from_what_was_measured():
    x = np.linspace(0, 4, 30)
    line = fit_line(*sums(x, 0.02 + 0.001 * x + np.sin(x) * 1e-4, np.ones(30)))
    assert line.stderr(2.0) < line.stderr(20.0) < line.stderr(60.0)


def test_the_two_way_fit_is_the_poisson_maximum_likelihood():
    rng = np.random.default_rng(1)
    rows, cols = 5, 4
    exposure = rng.uniform(5, 80, (rows, cols))
    exposure[0, 3] = exposure[4, 0] = 0.0  # cells nothing measured
    truth = rng.uniform(0.3, 3, rows)[:, None] * rng.uniform(0.5, 8, cols)[None, :]
    counts = rng.poisson(exposure * truth).astype(float)
    row, col = two_way(exposure, counts, sweeps=500)
    # The reference: log(rate) = row effect + col effect, weighted by exposure (scikit-learn's GLM).
    seen = exposure > 0
    d, p = np.nonzero(seen)
    design = np.hstack([np.eye(rows)[d], np.eye(cols)[p]])
    model = PoissonRegressor(alpha=0.0, fit_intercept=False, max_iter=10_000, tol=1e-12)
    model.fit(design, counts[seen] / exposure[seen], sample_weight=exposure[seen])
    reference = np.exp(design @ model.coef_)
    assert (row[d] * col[p]) == pytest.approx(reference, rel=1e-5)
    assert row.mean() == pytest.approx(1.0)


def test_the_two_way_fit_leaves_unmeasured_rows_typical_and_columns_unknown():
    exposure = np.array([[10.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    row, col = two_way(exposure, np.array([[20.0, 5.0, 0.0], [0.0, 0.0, 0.0]]))
    assert row[1] == 1.0 and col[0] == pytest.approx(2.0) and math.isnan(col[1]) and math.isnan(col[2])


def test_combine_weighs_by_precision():
    assert combine(2.0, 1.0, 4.0, 1.0) == pytest.approx((3.0, 0.5))
    assert combine(2.0, math.inf, 4.0, 0.5) == (4.0, 0.5)  # nothing measured: the prior
    assert combine(2.0, 0.01, 4.0, 100.0)[0] == pytest.approx(2.0, abs=1e-3)


def test_the_prior_line_of_an_unmeasured_pool_is_optimistic():
    costs = PoolCosts(halflife=100.0)
    for k, seconds in ((2, 2.5), (4, 3.9), (8, 6.7)):  # fixed-K pools: 1.1 + 0.7 K plain steps
        for _ in range(3):
            costs.add(k, 10.0, 10.0 * k, 10.0 * seconds)
    prior = costs.prior()
    assert prior.alpha == pytest.approx(1.1, rel=0.01)  # the line across pools, at K = 0: off's plain step
    assert prior.beta == 0.0  # each fixed-K pool alone shows no slope
    assert costs.line(0) is None and PoolCosts(1.0).prior() is None
