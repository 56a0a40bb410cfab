"""scikit-learn fits behind the model-based policies: acceptance by position, cost by K, early-stop rules.

Each takes (discounted) sums or logged pairs and returns plain numbers; none keeps state, so the sklearn
fits (trends, threshold, calibration; milliseconds each) can run on copies off the per-step path, in the
policies' ``refit`` (see ``ModelBased.prepare_refit``); the cheap ``shrink`` runs every few dozen steps.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import sklearn
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.metrics import roc_curve

from policies.estimates import shrink  # here for the fits' callers; kept free of sklearn there

# Inputs are built here from finite sums; skipping sklearn's checks halves the cost of these tiny fits.
_FAST = dict(assume_finite=True, skip_parameter_validation=True)
_EPS = 1e-9


def acceptance_trend(reached: Sequence[float], accepted: Sequence[float],
                     default: float = 0.5) -> list[float]:
    """A smooth conditional acceptance for drafted positions 1..n: logistic regression of accepted on
    position, with sample weights the per-position accepted and rejected sums. Shrinking each position's
    rate toward it (``shrink``, a Beta prior centred on the trend) lets rarely reached positions borrow
    strength from their neighbours. A constant when only one outcome was seen; ``default`` with no data."""
    r = np.asarray(reached, dtype=float)
    a = np.minimum(np.asarray(accepted, dtype=float), r)
    n = len(r)
    rejected = r - a
    if r.sum() <= _EPS:
        return [default] * n
    if a.sum() <= _EPS or rejected.sum() <= _EPS:
        return [float(a.sum() / r.sum())] * n
    pos = np.arange(1, n + 1, dtype=float)
    x = np.concatenate([pos, pos])[:, None]
    y = np.concatenate([np.ones(n), np.zeros(n)])
    w = np.concatenate([a, rejected])
    keep = w > _EPS
    with sklearn.config_context(**_FAST):
        # liblinear: the cheapest exact solver for one feature; C large enough to leave the data in charge.
        model = LogisticRegression(C=100.0, solver="liblinear", random_state=0)
        model.fit(x[keep], y[keep], sample_weight=w[keep])
    return (1.0 / (1.0 + np.exp(-(model.coef_[0, 0] * pos + model.intercept_[0])))).tolist()


def fixed_cost_sums(weight: Sequence[float], draft_sum: Sequence[float],
                    verify_sum: Sequence[float]) -> tuple[float, list[float]]:
    """Split step seconds (per-K sums, index = K) into ``(draft seconds per token, fixed-part sums)``.

    Draft seconds per token is total draft time over total drafted tokens (the least-squares slope when a
    step's variance grows with K). The fixed part of a K-step is draft + verify seconds less K draft tokens:
    the verify pass plus any per-step draft overhead, so a measured K keeps its measured total.
    """
    drafted = sum(k * w for k, w in enumerate(weight))
    per_token = sum(draft_sum[1:]) / drafted if drafted > _EPS else 0.0
    return per_token, [d + v - per_token * k * w
                       for k, (w, d, v) in enumerate(zip(weight, draft_sum, verify_sum))]


def cost_trend(weight: Sequence[float], fixed_sum: Sequence[float]) -> list[float]:
    """The fixed part of a step as a line in K: weighted linear regression of per-K means on K, slope >= 0
    (verifying more tokens never costs less), floored at half the cheapest measured mean. It fills in
    lookaheads with little or no data (``shrink`` toward it)."""
    w = np.asarray(weight, dtype=float)
    have = w > _EPS
    if not have.any():
        raise ValueError("cost_trend: no step measured yet")
    ks = np.arange(len(w), dtype=float)
    means = np.asarray(fixed_sum, dtype=float)[have] / w[have]
    trend = np.full(len(w), float(np.average(means, weights=w[have])))
    if have.sum() >= 2:
        with sklearn.config_context(**_FAST):
            model = LinearRegression().fit(ks[have, None], means, sample_weight=w[have])
        if model.coef_[0] > 0:  # else the slope >= 0 least-squares fit is the constant above
            trend = model.coef_[0] * ks + model.intercept_
    return np.maximum(trend, means.min() * 0.5).tolist()


def roc_threshold(confidence: Sequence[float], accepted: Sequence[int], weight: float = 3.0) -> float | None:
    """The confidence below which drafting should stop: argmin over ROC thresholds of fpr + weight * fnr.

    Positives are accepted drafted tokens; a threshold t predicts "accepted" when confidence >= t. As in
    transformers' assisted generation (weight 3) and DISCO (arXiv 2405.04304). ``None`` when the pairs
    hold only one class (no threshold is identifiable). The result is clipped to [0, 1].
    """
    y = np.asarray(accepted, dtype=bool)
    if y.all() or not y.any():
        return None
    s = np.asarray(confidence, dtype=float)
    with sklearn.config_context(**_FAST):
        fpr, tpr, thresholds = roc_curve(y, s)
    cost = fpr + min(weight, 1e6) * (1.0 - tpr)
    return float(min(max(thresholds[int(np.argmin(cost))], 0.0), 1.0))


def calibration_table(confidence: Sequence[float], accepted: Sequence[int], bins: int = 1000) -> list[float]:
    """P(accept | confidence) at the centres of ``bins`` equal bins of [0, 1] (look up ``int(c * bins)``).

    Isotonic regression of accepted on confidence: acceptance may not fall as the draft grows more sure,
    and no shape beyond that is assumed (real drafts are close to a step: almost always rejected below some
    confidence, almost always accepted above it). A constant with only one outcome seen.
    """
    y = np.asarray(accepted, dtype=float)
    if len(y) == 0:
        raise ValueError("calibration_table: no (confidence, accepted) pairs")
    grid = (np.arange(bins) + 0.5) / bins
    if y.min() == y.max():
        return [float(y[0])] * bins
    with sklearn.config_context(**_FAST):
        model = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip")
        model.fit(np.asarray(confidence, dtype=float), y)
        return model.predict(grid).tolist()


def position_rates(positions: Sequence[int], accepted: Sequence[int], n: int,
                   prior_strength: float = 20.0) -> list[float]:
    """Acceptance at drafted positions 1..n from logged (position index, accepted) pairs (index 0 is
    position 1), each shrunk toward the pooled rate by ``prior_strength`` pseudo-pairs (``shrink``)."""
    if len(accepted) == 0:
        raise ValueError("position_rates: no (position, accepted) pairs")
    pos = np.minimum(np.asarray(positions, dtype=int), n - 1)
    acc = np.asarray(accepted, dtype=float)
    counts = np.bincount(pos, minlength=n).astype(float)
    hits = np.bincount(pos, weights=acc, minlength=n)
    return shrink(hits.tolist(), counts.tolist(), [float(acc.mean())] * n, prior_strength)
