"""Rollout verdicts as pure functions: break-even, re-distill on a drop, lower K, keep; the cost model."""

from __future__ import annotations

import pytest

from policies.goodput import break_even_acceptance, leviathan_speedup
from policies.rollout import RolloutConfig, StepCost, fitted_verify, judge, speedups

LEVIATHAN = StepCost.from_ratio(0.25)


def test_speedups_are_leviathans_in_target_step_units():
    ratios = speedups(0.7, LEVIATHAN, 8)
    assert ratios[0] == 1.0
    for k in range(1, 9):
        assert ratios[k] == pytest.approx(leviathan_speedup(0.7, k, 0.25))


def test_off_exactly_below_break_even():
    even = break_even_acceptance(1, 0.25)
    assert judge(even - 0.01, LEVIATHAN, 4).verdict == "off"
    above = judge(even + 0.01, LEVIATHAN, 4)
    assert above.verdict != "off" and above.lookahead == 1 and above.speedup > 1
    assert judge(even - 0.01, LEVIATHAN, 4).break_even == pytest.approx(even)
    # a higher bar turns off what merely breaks even
    assert judge(even + 0.01, LEVIATHAN, 4, config=RolloutConfig(min_speedup=1.2)).verdict == "off"


def test_redistill_on_a_drop_even_above_break_even():
    v = judge(0.75, LEVIATHAN, 4, before=0.95)
    assert v.verdict == "redistill" and v.drop == pytest.approx(0.2) and v.speedup > 1.5
    assert judge(0.75, LEVIATHAN, 4, before=0.80).verdict != "redistill"
    assert judge(0.75, LEVIATHAN, 4, before=0.95, config=RolloutConfig(max_drop=0.3)).verdict != "redistill"


def test_lower_when_the_best_k_falls_below_the_served_one_else_keep():
    lower = judge(0.55, LEVIATHAN, 8)
    assert lower.verdict == "lower" and 0 < lower.lookahead < 8 and lower.lookahead == lower.best_lookahead
    keep = judge(0.95, LEVIATHAN, 4)
    assert keep.verdict == "keep" and keep.lookahead == 4 and keep.best_lookahead > 4


def test_a_verify_that_grows_with_k_moves_break_even_up():
    flat, steep = StepCost(0.25, (1.0,)), StepCost(0.25, tuple(1.0 + 0.2 * k for k in range(9)))
    assert judge(0.3, flat, 4).verdict != "off" and judge(0.3, steep, 4).verdict == "off"


def test_fitted_verify_is_a_weighted_line_with_a_floor():
    assert fitted_verify([(0, 10.0, 1), (4, 14.0, 1)], 5) == pytest.approx((10, 11, 12, 13, 14, 15))
    assert fitted_verify([(4, 14.0, 7)], 2) == (14.0, 14.0, 14.0)
    assert min(fitted_verify([(2, 12.0, 1), (6, 11.0, 1)], 8)) >= 11.0  # a falling fit is flat, not below
    with pytest.raises(ValueError):
        fitted_verify([], 4)


@pytest.mark.parametrize("kwargs, message", [({"kmax": 0}, "kmax"), ({"min_speedup": 0}, "min_speedup"),
                                             ({"max_drop": 1.5}, "max_drop")])
def test_config_names_the_bad_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RolloutConfig(**kwargs)
