import pytest

from storage import ratios
from storage.ratios import Totals


def test_ratios_of_sums():
    spec = Totals(steps=2, drafted=8, accepted=6, emitted=8, draft_seconds=0.008, verify_seconds=0.02)
    plain = Totals(steps=1, emitted=1, verify_seconds=0.008)
    both = spec + plain
    assert ratios.acceptance_rate(both) == 0.75
    assert ratios.mean_accepted(spec) == 3.0
    assert ratios.tokens_per_step(both) == 3.0
    assert ratios.speedup(spec, plain) == pytest.approx((8 / 0.028) / (1 / 0.008))
    assert ratios.conditional_acceptance(4, 3) == 0.75


def test_empty_denominators_give_none():
    assert ratios.acceptance_rate(Totals(steps=3, emitted=3)) is None
    assert ratios.speedup(Totals(steps=1, drafted=4, emitted=3, verify_seconds=1.0), Totals()) is None
    assert ratios.speedup(Totals(), Totals(steps=1, emitted=1, verify_seconds=1.0)) is None
    assert ratios.expected_acceptance(Totals()) is None
