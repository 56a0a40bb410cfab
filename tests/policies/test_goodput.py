"""The pure goodput arithmetic, against closed forms and hand-computed cases."""

from __future__ import annotations

import math

import pytest

from policies.goodput import (best_lookahead, break_even_acceptance, expected_emitted, leviathan_speedup,
                              leviathan_tokens, predicted_goodput, stop_weight)


@pytest.mark.parametrize("a", [0.0, 0.3, 0.7, 0.95])
@pytest.mark.parametrize("k", [0, 1, 4, 8])
def test_expected_emitted_is_leviathan_for_a_constant_acceptance(a, k):
    # Guards the per-position product (an off-by-one in reach, or summing cond instead of multiplying, fails).
    closed_form = (1 - a ** (k + 1)) / (1 - a)
    assert expected_emitted([a] * k, k) == pytest.approx(closed_form)
    assert leviathan_tokens(a, k) == pytest.approx(closed_form)


def test_expected_emitted_uses_conditional_acceptance_per_position():
    # 1 + .9 + .9*.5 + .9*.5*.2; positions past cond count as never accepted.
    assert expected_emitted([0.9, 0.5, 0.2], 3) == pytest.approx(1 + 0.9 + 0.45 + 0.09)
    assert expected_emitted([0.9, 0.5, 0.2], 5) == pytest.approx(expected_emitted([0.9, 0.5, 0.2], 3))
    assert expected_emitted([1.0] * 4, 4) == 5.0


@pytest.mark.parametrize("cond, draft, verify, kmax, best", [
    # tokens/seconds per K at a = .8, verify 10: 1/10, 1.8/13, 2.44/16, 2.952/19 (best), 3.3616/22
    ([0.8] * 4, 3.0, [10.0] * 5, 4, 3),
    # cheap drafts: 3.3616/14 at K = 4 beats 2.952/13
    ([0.8] * 4, 1.0, [10.0] * 5, 4, 4),
    # low acceptance: K = 1 gives 1.2/13 < 1/10, speculation off
    ([0.2] * 4, 3.0, [10.0] * 5, 4, 0),
    # a verify cost jump at K = 3: 2.71/10 at K = 2 beats 3.439/30
    ([0.9] * 4, 0.0, [10.0, 10.0, 10.0, 30.0, 30.0], 4, 2),
])
def test_best_lookahead_on_hand_computed_cases(cond, draft, verify, kmax, best):
    # Guards the argmax (argmin, or scoring by tokens alone, picks another K in at least one case).
    assert best_lookahead(cond, draft, verify, kmax) == best
    scores = [predicted_goodput(cond, k, draft, verify) for k in range(kmax + 1)]
    assert max(scores) == scores[best]


@pytest.mark.parametrize("k, c, ratio", [(1, 0.1, 1.0), (4, 0.05, 1.0), (4, 0.2, 1.1), (8, 0.02, 1.3)])
def test_break_even_acceptance_round_trips(k, c, ratio):
    # Guards the bisection direction and the cost it solves for: at the returned a, speculation costs
    # exactly what it gives; a hair below is slower than plain decoding, a hair above faster.
    a = break_even_acceptance(k, c, ratio)
    assert 0.0 < a < 1.0
    assert leviathan_tokens(a, k) == pytest.approx(k * c + ratio, rel=1e-9)
    if ratio == 1.0:
        assert leviathan_speedup(a - 0.01, k, c) < 1.0 < leviathan_speedup(a + 0.01, k, c)


def test_break_even_is_one_when_nothing_breaks_even():
    assert break_even_acceptance(2, 1.5) == 1.0  # 2 * 1.5 + 1 = 4 > 3 tokens at most
    assert break_even_acceptance(0, 0.1) == 0.0


def test_stop_weight_from_costs():
    # Guards the cost ratio and the class-ratio scaling: (.75 * 2 - .5) / .5 = 2 in counts, times
    # .75 / .25 = 3 for rates -> 6; a dropped class ratio gives 2, an inverted cost ratio 1.5.
    assert stop_weight(0.75, 2.0, 0.5) == pytest.approx(6.0)
    # Drafting a token costs more than it is expected to return: always stop.
    assert stop_weight(0.5, 1.0, 0.6) == 0.0
    assert math.isinf(stop_weight(0.5, 1.0, 0.0))
    # Dearer drafts: stopping pays more often, so misses weigh less.
    assert stop_weight(0.8, 1.0, 0.1) > stop_weight(0.8, 1.0, 0.3)
