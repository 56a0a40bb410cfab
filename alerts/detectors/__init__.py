"""Drift detectors of acceptance streams (river-style: ``update(x)`` returns self, then ``drift_detected``)."""

from alerts.detectors.adwin import ADWINConfig, ADWINDetector
from alerts.detectors.base import Change, Detector
from alerts.detectors.cusum import BernoulliCUSUM, CUSUMConfig
from alerts.detectors.expected_cusum import ExpectedCUSUM, ExpectedCUSUMConfig
from alerts.detectors.sprt import BernoulliSPRT, ExpectedSPRT, SPRTConfig

__all__ = ["ADWINConfig", "ADWINDetector", "BernoulliCUSUM", "BernoulliSPRT", "CUSUMConfig", "Change",
           "Detector", "ExpectedCUSUM", "ExpectedCUSUMConfig", "ExpectedSPRT", "SPRTConfig"]
