"""Every policy, alone and behind the switch: the interface contract, seeded determinism, and exact output
when it drives the real decoder (greedy output equals the target's own, whatever K it picks)."""

from __future__ import annotations

import pytest

from policies import registry
from policies.base import ArmStats, Decision, Policy
from synthetic_world import World

NAMES = ["fixed:3", "heuristic", "thompson", "sliding-ucb", "model-based", "confidence-stop", "pool-ucb",
         "pool-model", "pool-cap"]
ALL = NAMES + [n + "+switch" for n in NAMES]


def drive(policy: Policy, steps: int, seed: int = 0) -> list[Decision]:
    worlds = {"code": World(accept=0.9, seed=seed), "logs": World(accept=0.2, seed=seed + 1)}
    out = []
    for i in range(steps):
        domain = "code" if i % 3 else "logs"
        d = policy.choose(domain)
        out.append(d)
        assert policy.update(domain, worlds[domain].step(d.lookahead)) is policy
    return out


@pytest.mark.parametrize("name", ALL)
def test_decisions_follow_the_contract(name):
    policy = registry.make(name, kmax=6, seed=1)
    for d in drive(policy, 600):
        assert isinstance(d, Decision) and type(d.lookahead) is int and 0 <= d.lookahead <= 6
        assert d.speculate == (d.lookahead > 0)
        assert d.reason and isinstance(d.reason, str) and d.policy == policy.name


@pytest.mark.parametrize("name", ALL)
def test_same_seed_same_choices(name):
    first = [d.lookahead for d in drive(registry.make(name, kmax=6, seed=7), 400)]
    again = [d.lookahead for d in drive(registry.make(name, kmax=6, seed=7), 400)]
    assert first == again


@pytest.mark.parametrize("name", ALL)
def test_warm_start_returns_the_policy_and_accepts_history(name):
    policy = registry.make(name, kmax=6, seed=1)
    history = [ArmStats(0, 100, 100, 0.0, 1.0), ArmStats(4, 100, 400, 0.8, 1.4, (100, 90, 80, 70), (90, 80, 70, 60))]
    assert policy.warm_start("code", history) is policy
    assert 0 <= policy.choose("code").lookahead <= 6


def test_unknown_names_are_rejected_with_the_choices():
    with pytest.raises(ValueError, match="choose from"):
        registry.make("greedy-oracle")
    with pytest.raises(ValueError, match="fixed:K"):
        registry.make("fixed:x")


@pytest.fixture(scope="module")
def decoder_and_reference():
    from agent.decoding.decoder import SpeculativeDecoder
    from tiny_models import llama, perturbed

    target = llama(seed=0)
    decoder = SpeculativeDecoder(target, perturbed(target, 0.05), seed=0)
    prompt = [1, 2, 3, 4]
    return decoder, prompt, decoder.generate(prompt, 24, 0).tokens


@pytest.mark.parametrize("name", ALL)
def test_driving_the_real_decoder_keeps_greedy_output_exact(name, decoder_and_reference):
    from agent.decoding import steer

    decoder, prompt, reference = decoder_and_reference
    policy = registry.make(name, kmax=5, seed=3)
    for _ in range(2):
        gen = steer.generate(decoder, policy, prompt, 24, domain="code")
        assert gen.tokens == reference
        assert all(0 <= s.lookahead <= 5 for s in gen.steps)
