"""``forget(domain)`` over every policy in the registry, alone and behind the switch: after it, the policy
holds no trace of the domain and its other domains are untouched; a no-op forget is caught (the check can
fail). A forgotten domain then starts like a new one."""

from __future__ import annotations

import pytest

from policies import registry
from policies.base import ArmStats, Policy
from synthetic_world import World
from traces import traces

NAMES = ["fixed:3", "heuristic", "thompson", "sliding-ucb", "model-based", "confidence-stop", "pool-model",
         "pool-cap"]
ALL = NAMES + [n + "+switch" for n in NAMES]
GONE, KEPT = "evicted-domain-7f3a", "kept-domain-91c2"


def drive(policy: Policy, steps: int = 900) -> None:
    worlds = {GONE: World(accept=0.8, seed=1), KEPT: World(accept=0.3, seed=2)}
    history = [ArmStats(2, 50, 120, 0.05, 0.5, (50, 40), (40, 30))]
    policy.warm_start(GONE, history)
    for i in range(steps):
        domain = GONE if i % 2 else KEPT
        d = policy.choose(domain)
        policy.update(domain, worlds[domain].step(d.lookahead))
        policy.stop_drafting(domain)
        policy.stop_state(domain)
    refit = getattr(policy, "refit", None)
    if callable(refit):
        refit()


@pytest.mark.parametrize("name", ALL)
def test_forget_leaves_no_trace_and_keeps_the_rest(name):
    policy = registry.make(name, kmax=6, seed=3)
    drive(policy)
    kept_before = traces(policy, KEPT)
    assert policy.forget(GONE) is policy
    assert traces(policy, GONE) == []
    assert traces(policy, KEPT) == kept_before
    assert policy.choose(KEPT).lookahead >= 0


@pytest.mark.parametrize("name", [n for n in ALL if not n.startswith("fixed")])
def test_a_no_op_forget_is_caught(name):
    """The broken variant: the state of a domain is found where forget must have dropped it."""
    policy = registry.make(name, kmax=6, seed=3)
    drive(policy)
    Policy.forget(policy, GONE)  # the base class's default: nothing
    assert traces(policy, GONE) != []


@pytest.mark.parametrize("name", ["heuristic", "thompson", "sliding-ucb", "model-based+switch"])
def test_a_forgotten_domain_starts_like_a_new_one(name):
    policy, fresh = registry.make(name, kmax=6, seed=3), registry.make(name, kmax=6, seed=3)
    drive(policy)
    policy.forget(GONE)
    assert policy.choose(GONE).reason.split(":")[0] == fresh.choose(GONE).reason.split(":")[0]
    if name == "heuristic":
        assert policy.choose(GONE) == fresh.choose(GONE)
