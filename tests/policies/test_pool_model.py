"""PoolModel: the back-out of acceptance and the predicted goodput alone, then on simulated pools
(bench/pool_world.py, costs like the full kit's under llama.cpp): near the best fixed pool within 24
requests per domain where a random router is not, and a stale draft left for ``off`` within 50 requests.
Power: the random router is run through the same check and must fail it."""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root: bench/ is not installed

from bench.pool_world import POOLS, PoolWorld, goodput, run  # noqa: E402
from policies.goodput import leviathan_tokens  # noqa: E402
from policies.pool_model import PoolModel, backed_out_acceptance, pool_goodput  # noqa: E402
from pool_checks import RandomPools, stale_draft_moves_to_off  # noqa: E402

ACCEPT = {"code": 0.97, "prose": 0.9, "logs": 0.8, "chat": 0.94}  # best: k4, k2, off, k4
ARMS = sorted(POOLS.values())
SEEDS = range(8)


def test_backed_out_acceptance_inverts_the_expected_accepted_length():
    for a in (0.3, 0.8, 0.95):
        steps = [0.0, 0.0, 100.0, 0.0, 50.0]
        accepted = [0.0, 0.0, 100 * (leviathan_tokens(a, 2) - 1), 0.0, 50 * (leviathan_tokens(a, 4) - 1)]
        assert backed_out_acceptance(steps, accepted, range(5)) == pytest.approx(a, abs=1e-9)
    assert backed_out_acceptance([5.0, 0.0], [0.0, 0.0], [0, 2]) is None
    assert backed_out_acceptance([0.0, 10.0], [0.0, 0.0], [0, 2]) == 0.0
    assert backed_out_acceptance([0.0, 10.0], [0.0, 20.0], [0, 2]) == 1.0


def test_backing_out_removes_the_bias_of_accepted_over_drafted():
    world = PoolWorld({"d": 0.8}, seed=1)
    for k in (2, 8):
        outs = [world.request("d", k, i) for i in range(200)]
        steps, accepted = sum(o.steps for o in outs), sum(o.accepted for o in outs)
        drafted = sum(o.drafted for o in outs)
        assert backed_out_acceptance([steps], [accepted], [drafted / steps]) == pytest.approx(0.8, abs=0.02)
    assert accepted / drafted < 0.5  # at K = 8 the raw rate reads far lower


def test_pool_goodput():
    assert pool_goodput(0.9, 0, 0.002) == pytest.approx(500.0)
    assert pool_goodput(0.5, 2, 0.004) == pytest.approx(1.75 / 0.004)
    # A pool's own tokens per step take over from the model as its steps outweigh the prior.
    assert pool_goodput(0.5, 2, 0.004, tokens=300.0, steps=100.0, prior_steps=100.0) == pytest.approx(
        (3.0 + 1.75) / 2 / 0.004)
    assert pool_goodput(0.5, 2, 0.0) == 0.0


def expected(domain: str, k: int) -> float:
    w = PoolWorld(ACCEPT)
    return leviathan_tokens(ACCEPT[domain], k) / (1.0 if k == 0 else w.overhead + w.draft * k)


def scores(make) -> tuple[dict[str, float], dict[str, float]]:
    """Per domain over the seeds: mean tokens/s as a share of the best fixed pool on the same 24 requests,
    and the share of requests 13-24 sent to a pool within 3% of the best one's expected goodput."""
    share, near = {d: [] for d in ACCEPT}, {d: [] for d in ACCEPT}
    for seed in SEEDS:
        world, policy = PoolWorld(dict(ACCEPT), seed=seed), make(seed)
        got = run(policy, world, list(ACCEPT), 24, rng=random.Random(seed))
        for d, outs in got.items():
            best = max(world.fixed_goodput(d, k, range(24)) for k in ARMS)
            share[d].append(goodput(outs) / best)
            top = max(expected(d, k) for k in ARMS)
            near[d].append(sum(expected(d, o.lookahead) >= 0.97 * top for o in outs[12:]) / 12)
    return ({d: sum(v) / len(v) for d, v in share.items()}, {d: sum(v) / len(v) for d, v in near.items()})


def test_reaches_the_best_pool_with_few_probes():
    share, near = scores(lambda seed: PoolModel(seed=seed).restrict(ARMS))
    assert min(share.values()) >= 0.95, share
    assert min(near.values()) >= 0.75, near


def test_a_random_router_fails_the_same_check():
    share, near = scores(lambda seed: RandomPools(seed=seed))
    assert min(share.values()) < 0.95 or min(near.values()) < 0.75


def test_a_stale_draft_moves_to_off_within_fifty_requests():
    for seed in SEEDS:
        stale_draft_moves_to_off(PoolModel(seed=seed).restrict(ARMS), seed, within=3)


def test_untried_pools_first_then_only_available_ones():
    policy = PoolModel(seed=0).restrict([0, 4])
    world = PoolWorld({"d": 0.9})
    chosen = [o.lookahead for o in run(policy, world, ["d"], 30)["d"]]
    assert set(chosen) == {0, 4} and sorted(chosen[:4]) == [0, 0, 4, 4]
    assert "not measured" in PoolModel().restrict([0, 2]).choose("d").reason
    with pytest.raises(ValueError, match="no arm"):
        PoolModel(kmax=4).restrict([9])


def test_costs_are_shared_across_domains():
    policy = PoolModel(seed=0).restrict(ARMS)
    world = PoolWorld({"a": 0.9, "b": 0.9})
    run(policy, world, ["a"], 24)
    assert policy.cost(8)[0] > policy.cost(0)[0] > 0
    assert "predicts" in policy.choose("b").reason  # a new domain predicts from the first one's evidence
    assert policy.acceptance("b")[0] == pytest.approx(0.9, abs=0.05)
    a, se = policy.acceptance("a")
    costs = [policy.cost(k) for k in ARMS]
    policy.reconsider()  # a version change: the same means, far less sure of them
    a2, se2 = policy.acceptance("a")
    assert a2 == pytest.approx(a, abs=0.02) and se2 > 1.5 * se
    for k, (seconds, rel) in zip(ARMS, costs):
        assert policy.cost(k)[0] == pytest.approx(seconds) and rel < policy.cost(k)[1] < math.inf


class ForgetAll(PoolModel):
    """The broken variant: a version change forgets every acceptance and cost (as the policy once did)."""

    def reconsider(self):
        self._clear()
        return self


def untried_after_a_version_change(make, change: bool = True) -> int:
    """Over the seeds: requests chosen because a pool's cost was "not measured yet" in the 24 per domain
    after a version change (nothing else changed; ``change=False``: no version change, the baseline)."""
    untried = 0
    for seed in SEEDS:
        world, policy = PoolWorld(dict(ACCEPT), seed=seed), make(seed)
        run(policy, world, list(ACCEPT), 24, rng=random.Random(seed))
        if change:
            policy.reconsider()
        for i in range(24):
            for d in ACCEPT:
                decision = policy.choose(d)
                untried += "not measured" in decision.reason
                policy.update(d, world.request(d, decision.lookahead, 24 + i))
    return untried


def test_a_version_change_keeps_serving_from_what_was_known():
    def make(seed):
        return PoolModel(seed=seed).restrict(ARMS)

    baseline = untried_after_a_version_change(make, change=False)  # pools whose few costs faded anyway
    assert untried_after_a_version_change(make) <= baseline + 1
    forgot = untried_after_a_version_change(lambda seed: ForgetAll(seed=seed).restrict(ARMS))
    assert forgot >= baseline + len(SEEDS) * 4, (forgot, baseline)


def after_a_version_change(make, change: dict[str, float]) -> list[int]:
    """Per seed and domain made stale by ``change`` (off best after it): the request, of the 24 after the
    version change, from which it stayed on off (the first of five off in a row)."""
    settled = []
    for seed in SEEDS:
        world, policy = PoolWorld(dict(ACCEPT), seed=seed), make(seed)
        run(policy, world, list(ACCEPT), 24, rng=random.Random(seed))
        world.accept.update(change)
        policy.reconsider()
        got = run(policy, world, list(ACCEPT), 24, start=24, rng=random.Random(seed + 1))
        for d in change:
            ks = [o.lookahead for o in got[d]]
            settled.append(next(j for j in range(len(ks) - 4) if not any(ks[j:j + 5])))
    return settled


def test_a_version_change_that_leaves_the_draft_stale_still_moves_to_off_at_once():
    settled = after_a_version_change(lambda seed: PoolModel(seed=seed).restrict(ARMS), {"code": 0.4, "chat": 0.45})
    assert settled and max(settled) <= 2, settled


@pytest.mark.parametrize("kwargs", [dict(halflife=0), dict(z=-1), dict(min_requests=0), dict(drift=math.inf)])
def test_bad_parameters_are_named(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        PoolModel(**kwargs)


def bisected(steps, accepted, lookaheads) -> float:
    """The reference: bisection on the same equation."""
    pairs = [(s, k) for s, k in zip(steps, lookaheads) if s > 0 and k > 0]
    low, high = 0.0, 1.0
    for _ in range(60):
        a = 0.5 * (low + high)
        if sum(s * (leviathan_tokens(a, k) - 1.0) for s, k in pairs) < sum(accepted):
            low = a
        else:
            high = a
    return 0.5 * (low + high)


def test_the_newton_back_out_equals_bisection():
    rng = random.Random(7)
    for _ in range(2000):
        ks = [rng.choice([0, 1, 2, 4, 8]) * rng.uniform(0.3, 1.0) for _ in range(rng.randint(1, 5))]
        steps = [rng.uniform(0.1, 500) for _ in ks]
        a = rng.choice([rng.random(), 1e-4, 0.9999, 0.5])
        accepted = [s * (leviathan_tokens(a, k) - 1.0) * rng.uniform(0.8, 1.2) for s, k in zip(steps, ks)]
        got = backed_out_acceptance(steps, accepted, ks)
        if got is None or got in (0.0, 1.0):
            continue
        assert got == pytest.approx(bisected(steps, accepted, ks), abs=1e-9)
