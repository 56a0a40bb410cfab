"""PoolUCB: the index alone, arm restriction, learning the best pool, leaving a stale one."""

from __future__ import annotations

import math
import random

import pytest

from policies.base import Outcome
from policies.pool_ucb import PoolUCB, pool_index


def test_pool_index():
    assert pool_index(100.0, 0.0, 0.1, 10.0, 1.0) == math.inf
    assert pool_index(100.0, 4.0, 0.2, math.e ** 4, 1.0) == pytest.approx(100.0 * (1 + 0.2 * 1.0))
    assert pool_index(100.0, 4.0, 0.2, 1.0, 1.0) == pytest.approx(100.0 * (1 + 0.2 * math.sqrt(math.log(2) / 4)))
    assert pool_index(100.0, 4.0, 0.2, 50.0, 0.0) == 100.0


def request(k: int, rate: float, rng: random.Random) -> Outcome:
    seconds = 0.1 * (1 + 0.1 * rng.random())
    return Outcome(k, 0, max(1, round(rate * seconds)), 0.0, seconds)


def run(policy: PoolUCB, rates: dict[int, float], n: int, rng: random.Random) -> list[int]:
    chosen = []
    for _ in range(n):
        k = policy.choose("d").lookahead
        chosen.append(k)
        policy.update("d", request(k, rates[k], rng))
    return chosen


def test_chooses_only_available_arms_and_learns_the_best():
    rng = random.Random(0)
    policy = PoolUCB(kmax=8, seed=1).restrict([0, 2, 4])
    chosen = run(policy, {0: 100.0, 2: 180.0, 4: 150.0}, 300, rng)
    assert set(chosen) <= {0, 2, 4}
    assert chosen[-100:].count(2) >= 85


def test_a_stale_pool_is_left_within_fifty_requests():
    rng = random.Random(0)
    policy = PoolUCB(kmax=8, seed=1).restrict([0, 4])
    assert run(policy, {0: 100.0, 4: 200.0}, 200, rng)[-20:].count(4) >= 18
    after = run(policy, {0: 100.0, 4: 60.0}, 50, rng)  # the target changed: the draft is stale
    assert after[30:].count(0) >= 16  # by request 30 the plain pool serves; K = 4 only probed now and then


def test_restrict_needs_an_arm_in_range():
    with pytest.raises(ValueError, match="no arm"):
        PoolUCB(kmax=4).restrict([9])
