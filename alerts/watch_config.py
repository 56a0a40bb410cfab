"""WatchConfig: the drift watch's settings (alerts/watch.py), in a module of its own so that alerts/lineage.py
reads them without importing alerts/watch.py, which imports it."""

from __future__ import annotations

from dataclasses import dataclass, field

from alerts.breakeven import BreakEvenConfig
from alerts.detectors import ADWINConfig, CUSUMConfig, ExpectedCUSUMConfig, SPRTConfig
from alerts.detectors.checks import check_count, check_positive

__all__ = ["WatchConfig"]


@dataclass(frozen=True)
class WatchConfig:
    """Detector configurations (None turns that detector off) and the version-change baseline:
    ``baseline_halflife`` (positions) of the running acceptance a new version is compared with,
    ``min_baseline`` positions of the old version needed to test a change at all, ``test_block`` positions
    per block of the long-run dispersion the version test divides by (about a request: the test decides on
    a few requests' worth), ``max_lineages`` version pairs remembered per domain, ``cost_halflife`` (steps)
    of the cost ratio and mean lookahead."""

    cusum: CUSUMConfig = field(default_factory=CUSUMConfig)
    expected: ExpectedCUSUMConfig | None = field(default_factory=ExpectedCUSUMConfig)
    adwin: ADWINConfig | None = field(default_factory=ADWINConfig)
    stale: SPRTConfig = field(default_factory=SPRTConfig)
    breakeven: BreakEvenConfig | None = field(default_factory=BreakEvenConfig)
    baseline_halflife: float = 2000.0
    min_baseline: int = 300
    test_block: int = 64
    max_lineages: int = 4
    cost_halflife: float = 500.0

    def __post_init__(self) -> None:
        for name, kind in (("cusum", CUSUMConfig), ("expected", ExpectedCUSUMConfig), ("adwin", ADWINConfig),
                           ("stale", SPRTConfig), ("breakeven", BreakEvenConfig)):
            value = getattr(self, name)
            if not isinstance(value, kind) and not (value is None and name not in ("cusum", "stale")):
                raise ValueError(f"{name} must be a {kind.__name__}, got {value!r}")
        check_positive("baseline_halflife", self.baseline_halflife)
        check_count("min_baseline", self.min_baseline)
        check_count("test_block", self.test_block)
        check_count("max_lineages", self.max_lineages, 2)
        check_positive("cost_halflife", self.cost_halflife)
