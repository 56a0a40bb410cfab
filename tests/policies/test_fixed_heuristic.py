"""Fixed and Heuristic: the exact schedule, validation, per-domain state."""

import pytest

from policies.base import Outcome
from policies.fixed import Fixed
from policies.heuristic import Heuristic


def step(k, accepted):
    return Outcome(k, accepted, accepted + 1, 0.001 * k, 0.02)


@pytest.mark.parametrize("k", [0, 3, 8])
def test_fixed_always_chooses_k(k):
    policy = Fixed(k)
    for _ in range(3):
        d = policy.update("code", step(5, 5)).choose("code")
        assert (d.lookahead, d.speculate, d.policy) == (k, k > 0, "fixed")
        assert d.reason == f"fixed: K={k}"


@pytest.mark.parametrize("k, kmax, name", [(-1, 8, "k must"), (9, 8, "k must"), (2.0, 8, "k must"),
                                           (True, 8, "k must"), (3, 0, "kmax")])
def test_fixed_validation(k, kmax, name):
    with pytest.raises(ValueError, match=name):
        Fixed(k, kmax=kmax)


def test_heuristic_schedule_is_exact():
    # transformers' rule: +2 after a fully accepted draft, -1 otherwise, never below 1; capped at kmax.
    policy = Heuristic(kmax=8)
    got = [policy.choose("d").lookahead]
    for accepted_all in [True, True, False, False, False, False, False, False, False, False, True]:
        k = got[-1]
        policy.update("d", step(k, k if accepted_all else k - 1))
        got.append(policy.choose("d").lookahead)
    assert got == [5, 7, 8, 7, 6, 5, 4, 3, 2, 1, 1, 3]


def test_heuristic_counts_a_full_accept_by_the_step_lookahead():
    # A step drafted at another K (the engine's choice) is judged on its own lookahead.
    policy = Heuristic(kmax=8, start=4)
    policy.update("d", step(2, 2))
    assert policy.choose("d").lookahead == 6
    policy.update("d", step(7, 6))
    assert policy.choose("d").lookahead == 5


def test_heuristic_never_turns_speculation_off_and_ignores_plain_steps():
    policy = Heuristic(kmax=4, start=1)
    for _ in range(5):
        policy.update("d", step(1, 0))
        policy.update("d", step(0, 0))  # speculation was off: says nothing about the draft
    d = policy.choose("d")
    assert (d.lookahead, d.speculate, d.policy) == (1, True, "heuristic")
    assert "-1" in d.reason


def test_heuristic_domains_are_independent():
    policy = Heuristic(kmax=8, start=3)
    policy.update("code", step(3, 3))
    assert policy.choose("code").lookahead == 5 and policy.choose("prose").lookahead == 3


def test_heuristic_default_start_fits_kmax():
    assert Heuristic().choose("d").lookahead == 5
    assert Heuristic(kmax=2).choose("d").lookahead == 2


@pytest.mark.parametrize("kwargs, name", [({"start": 0}, "start"), ({"start": 9}, "start"),
                                          ({"start": 2.5}, "start"), ({"kmax": -1}, "kmax")])
def test_heuristic_validation(kwargs, name):
    with pytest.raises(ValueError, match=name):
        Heuristic(**kwargs)
