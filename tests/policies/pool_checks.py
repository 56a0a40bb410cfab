"""Checks shared by the pool policies' tests."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root: bench/ is not installed

from bench.pool_world import POOLS, PoolWorld, run  # noqa: E402
from policies.base import Decision, Outcome, Policy  # noqa: E402


class RandomPools(Policy):
    """The broken variant of a pool policy: any of bench/pool_world.py's pools, uniformly."""

    name = "random-pools"

    def choose(self, domain: str) -> Decision:
        return self.decision(self._rng.choice(sorted(POOLS.values())), "random")

    def update(self, domain: str, outcome: Outcome) -> "RandomPools":
        return self


def stale_draft_moves_to_off(policy, seed: int, within: int) -> None:
    """On fixed-K pools (bench/pool_world.py), a domain served by a draft pool for 40 requests whose draft's
    acceptance then halves (a target update): it must reach ``off`` within ``within`` requests and stay."""
    world = PoolWorld({"d": 0.94}, seed=seed)
    before = run(policy, world, ["d"], 40)["d"]
    assert sum(o.lookahead > 0 for o in before[-20:]) >= 18
    world.accept["d"] = 0.47
    after = [o.lookahead for o in run(policy, world, ["d"], 50, start=40)["d"]]
    first_off = after.index(0)
    assert first_off <= within and after[first_off:].count(0) >= len(after[first_off:]) - 2, after
