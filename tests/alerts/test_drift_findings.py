"""The speed-up lost by a drop: Leviathan et al.'s formula as one pure function, and its annotations."""

import pytest

from alerts.findings import Speed, speed_annotations, speedup_lost
from policies.goodput import leviathan_speedup


def test_speedup_lost_by_hand():
    # (1 - 0.9^5) / (0.1 x 1.4) = 2.925; (1 - 0.4^5) / (0.6 x 1.4) = 1.178
    assert speedup_lost(0.9, 0.4, 4, 0.1) == pytest.approx(2.9251 - 1.1783, abs=1e-3)
    assert speedup_lost(0.7, 0.7, 4, 0.1) == 0.0
    assert speedup_lost(0.9, 0.4, 4, 0.1) == leviathan_speedup(0.9, 4, 0.1) - leviathan_speedup(0.4, 4, 0.1)


def test_annotations_without_timing_say_so():
    assert speed_annotations(0.9, 0.4, Speed(4, None)) == {"speedup_lost": "unknown (no timed speculative steps)"}
    notes = speed_annotations(0.9, 0.4, Speed(4, 0.1))
    assert notes["speedup_before"] == "2.93x" and notes["speedup_after"] == "1.18x"
    assert notes["speedup_lost"] == "1.75x"
