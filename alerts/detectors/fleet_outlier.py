"""FleetOutlier: a pod whose acceptance falls below its peers' on the same target/draft pair and domain.

A cross-sectional test, not a stream detector: each ``update`` takes one recent window of one domain and
pair, as accept counts per pod and time bucket (verified positions and the accepted among them), and tests
every pod against the pooled counts of the others (its peers):

    gap = a_peers - a_pod,   z = gap / sqrt(phi a (1 - a) (1 / n_pod + 1 / n_peers))

a the pooled acceptance, n verified positions. Accept flags are not independent (a hard passage rejects
run after run inside one request), so the binomial variance is scaled by the dispersion phi (quasi-binomial,
McCullagh and Nelder 1989, 4.5), estimated from how much each pod's buckets scatter around the pod's own
rate (Pearson's chi-square over the buckets / its degrees of freedom; at least 1). A pod is an outlier when
both hold:

- significant: z above the one-sided normal quantile of ``alpha / tests`` (Bonferroni over every pod,
  domain and pair the caller tests in one evaluation, so ``alpha`` bounds the chance of any false alarm in
  the whole fleet per evaluation);
- material: gap >= ``min_gap`` (pods' traffic differs a little, and with enough tokens any difference
  is significant; a bad node or a wrong draft image costs more than that).

A pod needs ``min_positions`` verified positions in ``min_buckets`` buckets, and ``min_peers`` other pods
with as much, to be tested. Only a pod below its peers is an outlier (a pod above them is not a problem to
page on). With two pods neither can be told from the other, hence ``min_peers`` = 2.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

from alerts.detectors.base import make_config
from alerts.detectors.checks import check_count, check_open_fraction, check_positive

Bucket = tuple[int, int]  # (verified positions, accepted) of one pod in one time bucket


@dataclass(frozen=True)
class FleetOutlierConfig:
    """``alpha``: false-alarm probability per evaluation over all tests of the evaluation; ``min_gap``:
    absolute acceptance a pod must fall below its peers; the rest: evidence needed to test (see the module)."""

    alpha: float = 1e-4
    min_gap: float = 0.10
    tolerance: float = 0.04
    min_positions: int = 2000
    min_buckets: int = 10
    min_peers: int = 2
    dispersion: bool = True  # False: plain binomial variance (for comparison only: it false-alarms)

    def __post_init__(self) -> None:
        check_open_fraction("alpha", self.alpha)
        if not (isinstance(self.min_gap, (int, float)) and 0 <= self.min_gap < 1):
            raise ValueError(f"min_gap must be a number in [0, 1), got {self.min_gap!r}")
        if not (isinstance(self.tolerance, (int, float)) and 0 <= self.tolerance <= self.min_gap):
            raise ValueError(f"tolerance must be a number in [0, min_gap], got {self.tolerance!r}")
        check_count("min_positions", self.min_positions)
        check_count("min_buckets", self.min_buckets, 2)
        check_count("min_peers", self.min_peers)


@dataclass(frozen=True, slots=True)
class PodResult:
    """One pod against its peers: acceptances, gap (peers minus pod), z and whether it is an outlier."""

    pod: str
    acceptance: float
    peers_acceptance: float
    gap: float
    z: float
    positions: int
    peers: tuple[str, ...]
    outlier: bool


class FleetOutlier:
    """See the module docstring. ``update(buckets, tests)``: ``buckets`` maps pod -> its buckets of one
    window, domain and pair; ``tests``: how many pod tests the whole evaluation runs (``testable`` counts
    this call's), for the Bonferroni correction. Then ``drift_detected``, ``outliers``, ``results``."""

    name = "fleet-outlier"

    def __init__(self, config: FleetOutlierConfig | None = None, **hyper):
        self.config = make_config(FleetOutlierConfig, config, hyper)
        self._results: list[PodResult] = []
        self._dispersion = 1.0

    def testable(self, buckets: Mapping[str, Sequence[Bucket]]) -> list[str]:
        """Pods with enough evidence that have enough peers with enough evidence (sorted)."""
        ready = sorted(p for p, bs in buckets.items() if self._enough(bs))
        return ready if len(ready) > self.config.min_peers else []

    def update(self, buckets: Mapping[str, Sequence[Bucket]], tests: int | None = None) -> "FleetOutlier":
        pods = self.testable(buckets)
        self._results = []
        if not pods:
            return self
        c = self.config
        tests = max(tests or len(pods), len(pods))
        check_positive("tests", tests)
        critical = NormalDist().inv_cdf(1 - c.alpha / tests)
        totals = {p: _sum(buckets[p]) for p in pods}
        self._dispersion = dispersion({p: buckets[p] for p in pods}) if c.dispersion else 1.0
        n_all = sum(n for n, _ in totals.values())
        k_all = sum(k for _, k in totals.values())
        for pod in pods:
            n, k = totals[pod]
            n_peers, k_peers = n_all - n, k_all - k
            a, a_peers, pooled = k / n, k_peers / n_peers, k_all / n_all
            se = math.sqrt(self._dispersion * pooled * (1 - pooled) * (1 / n + 1 / n_peers))
            gap = a_peers - a
            z = (gap - c.tolerance) / se if se > 0 else (math.inf if gap > c.tolerance else 0.0)
            self._results.append(PodResult(pod, a, a_peers, gap, z, n, tuple(p for p in pods if p != pod),
                                           z > critical and gap >= c.min_gap))
        return self

    @property
    def drift_detected(self) -> bool:
        """True when the last update found an outlier."""
        return any(r.outlier for r in self._results)

    @property
    def outliers(self) -> list[PodResult]:
        return [r for r in self._results if r.outlier]

    @property
    def results(self) -> list[PodResult]:
        """Every pod tested by the last update, outlier or not."""
        return list(self._results)

    @property
    def statistic(self) -> float:
        """The largest z of the last update (0 when nothing was tested)."""
        return max((r.z for r in self._results), default=0.0)

    @property
    def dispersion_estimate(self) -> float:
        return self._dispersion

    def reset(self) -> "FleetOutlier":
        self._results, self._dispersion = [], 1.0
        return self

    def _enough(self, buckets: Sequence[Bucket]) -> bool:
        n, k = _sum(buckets)
        return (n >= self.config.min_positions and 0 < k <= n
                and sum(1 for b, _ in buckets if b > 0) >= self.config.min_buckets)


def dispersion(buckets: Mapping[str, Sequence[Bucket]]) -> float:
    """Pearson's chi-square of every bucket around its pod's own rate over its degrees of freedom (buckets
    minus pods), at least 1: how much more the counts scatter than independent flags would."""
    chi2, df = 0.0, 0
    for rows in buckets.values():
        n, k = _sum(rows)
        rate = min(max(k / n, 1e-3), 1 - 1e-3)
        used = [(b, a) for b, a in rows if b > 0]
        chi2 += sum((a - b * rate) ** 2 / (b * rate * (1 - rate)) for b, a in used)
        df += len(used) - 1
    return max(1.0, chi2 / df) if df > 0 else 1.0


def _sum(buckets: Sequence[Bucket]) -> tuple[int, int]:
    return sum(b for b, _ in buckets), sum(a for _, a in buckets)
