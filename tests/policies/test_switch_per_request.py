"""The switch behind a pool policy counts requests, not steps (``SwitchConfig.per_request``).

On simulated pools (bench/pool_world.py) where speculation clearly wins, the switch must not hold many
requests back on ``off`` to measure K = 0, and a stale draft must still leave for ``off`` within a few
requests. Power: the per-step defaults, run through the same check, send far more requests to ``off``."""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root: bench/ is not installed

from bench.pool_world import POOLS, PoolWorld, run  # noqa: E402
from policies import registry  # noqa: E402
from policies.pool_model import PoolModel  # noqa: E402
from policies.switch import Switch, SwitchConfig  # noqa: E402
from policies.switched import Switched  # noqa: E402

ACCEPT = {"code": 0.97, "chat": 0.94}  # k4 best in both, well above off
ROUNDS = 60


def behind_switch(config: SwitchConfig | None, seed: int) -> Switched:
    return Switched(PoolModel(kmax=8, seed=seed).restrict(sorted(POOLS.values())), Switch(config, seed=seed))


def off_requests(policy, seed: int) -> int:
    got = run(policy, PoolWorld(dict(ACCEPT), seed=seed), list(ACCEPT), ROUNDS, 0, random.Random(seed))
    return sum(o.lookahead == 0 for outs in got.values() for o in outs)


def test_the_registry_gives_pool_policies_the_per_request_switch():
    assert registry.make("pool-model+switch").switch.config == SwitchConfig.per_request()
    assert registry.make("pool-ucb+switch").switch.config == SwitchConfig.per_request()
    assert registry.make("model-based+switch").switch.config == SwitchConfig()


def test_few_requests_are_held_on_off_where_speculation_wins():
    counts = [off_requests(behind_switch(SwitchConfig.per_request(), seed), seed) for seed in range(8)]
    assert max(counts) <= 0.05 * ROUNDS * len(ACCEPT), counts


def test_the_per_step_defaults_fail_the_same_check():
    counts = [off_requests(behind_switch(SwitchConfig(), seed), seed) for seed in range(8)]
    assert max(counts) > 0.05 * ROUNDS * len(ACCEPT), counts


def test_a_stale_draft_still_leaves_for_off_within_a_few_requests():
    for seed in range(8):
        policy = behind_switch(SwitchConfig.per_request(), seed)
        world = PoolWorld(dict(ACCEPT), seed=seed)
        run(policy, world, list(ACCEPT), 24, 0, random.Random(seed))
        world.accept["code"] = 0.4  # a target update leaves the draft stale in code
        got = run(policy, world, list(ACCEPT), 24, 24, random.Random(seed + 100))
        ks = [o.lookahead for o in got["code"]]
        settled = next(j for j in range(len(ks) - 4) if not any(ks[j:j + 5]))
        assert settled <= 6, (seed, ks)
        assert not policy.switch.is_on("code") or ks[-5:] == [0] * 5


def test_a_deferring_switch_never_overrules_the_policy_and_still_reports():
    # pool-cap weighs K = 0 itself: behind SwitchConfig.deferring() the switch forces no K = 0 request (no
    # baseline per domain, no probes) and lets the policy's K > 0 through while off; it reports transitions.
    switch = Switch(SwitchConfig.deferring(), seed=0)
    switch.warm_start("d", [], on=False)
    assert switch.gate("d", 8) == (8, "") and switch.gate("d", 0)[0] == 0
    on = Switch(SwitchConfig.deferring(), seed=0)
    assert all(on.gate("d", 4) == (4, "") for _ in range(200))
    held = Switch(SwitchConfig.per_request(), seed=0)  # the broken variant: the switch that holds K > 0 back
    held.warm_start("d", [], on=False)
    assert sum(held.gate("d", 8)[0] == 0 for _ in range(100)) > 90
    for _ in range(5):
        switch.update("d", PoolWorld({"d": 0.9}).request("d", 0, 0))
    assert [t.speculate for t in switch.transitions("d")] == []  # off already: K = 0 requests change nothing
    for i in range(5):
        on.update("d", PoolWorld({"d": 0.9}).request("d", 0, i))
    assert [t.speculate for t in on.transitions("d")] == [False]  # the policy ran K = 0: reported off
