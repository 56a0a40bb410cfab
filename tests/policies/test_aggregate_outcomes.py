"""Outcomes of aggregate records (many steps of one request): built from either kind of record, rewarded by
goodput over the record's step time in every policy, per-position parts only from what the record implies."""

from __future__ import annotations

import pytest

from policies import registry
from policies.base import Outcome
from policies.goodput import implied_lengths, leviathan_tokens
from policies.heuristic import Heuristic
from specwatch_core.records import StepRecord
from synthetic_world import World
from test_policy_contract import ALL

AGG = StepRecord(domain="code", lookahead=4, steps=10, drafted=36, accepted=24, emitted=33, draft_seconds=0.0,
                 verify_seconds=0.0, seconds=0.5, target_version="t1", draft_version="d1")


def fold(outcomes: list[Outcome], split: bool = False) -> Outcome:
    """Steps of one lookahead as one aggregate outcome, timed by seconds alone unless ``split``."""
    o = outcomes[0]
    d, v = sum(x.draft_seconds for x in outcomes), sum(x.verify_seconds for x in outcomes)
    return Outcome(o.lookahead, sum(x.accepted for x in outcomes), sum(x.emitted for x in outcomes),
                   d if split else 0.0, v if split else 0.0, steps=len(outcomes), seconds=d + v)


def test_outcome_of_either_record():
    o = Outcome.of(AGG)
    assert (o.steps, o.seconds, o.drafted, o.accepted_mask, o.aggregate) == (10, 0.5, 36, None, True)
    # time the engine did not split is verify time (as stored), so policies summing draft + verify agree
    assert (o.draft_seconds, o.verify_seconds) == (0.0, 0.5)
    per_step = StepRecord(domain="code", lookahead=3, accepted=1, emitted=2, draft_seconds=0.01,
                          verify_seconds=0.02, target_version="t1", draft_version="d1", accepted_mask=[1, 0, 0])
    o = Outcome.of(per_step)
    assert (o.steps, o.seconds, o.drafted, o.accepted_mask, o.aggregate) == (1, pytest.approx(0.03), 3,
                                                                             (1, 0, 0), False)
    old = Outcome(2, 1, 2, 0.1, 0.2, (1, 0))  # positional, as before: step time is draft + verify
    assert (old.steps, old.seconds, old.drafted) == (1, pytest.approx(0.3), 2)


@pytest.mark.parametrize("k, a", [(1, 0.5), (4, 0.9), (4, 0.3), (7, 0.75)])
def test_implied_lengths_give_back_the_mean_and_the_acceptance(k, a):
    shares = implied_lengths(k, leviathan_tokens(a, k) - 1.0)
    assert sum(shares) == pytest.approx(1.0)
    assert sum(j * s for j, s in enumerate(shares)) == pytest.approx(leviathan_tokens(a, k) - 1.0)
    assert shares[0] == pytest.approx(1 - a)  # the first position's acceptance is a
    assert implied_lengths(4, 0.0) == [1.0, 0, 0, 0, 0] and implied_lengths(4, 4.0) == [0, 0, 0, 0, 1.0]


@pytest.mark.parametrize("name", ALL)
def test_every_policy_learns_the_better_k_from_aggregates_alone(name):
    # per request of 16 steps: "code" pays with speculation (K = 4 gives 1.86 tokens per unit time, K = 0
    # gives 1), "logs" does not (K = 0 is best); time given as seconds alone
    if name.startswith(("fixed", "heuristic")):
        pytest.skip("learns no goodput")
    worlds = {"code": World(accept=0.9, seed=1), "logs": World(accept=0.3, draft_cost=0.3, seed=2)}
    policy = registry.make(name, kmax=4, seed=5)
    late = {d: [] for d in worlds}
    for i in range(500):
        for domain, world in worlds.items():
            k = policy.choose(domain).lookahead
            policy.update(domain, fold([world.step(k) for _ in range(16)]))
            if i >= 300:
                late[domain].append(k)
    assert sum(k >= 3 for k in late["code"]) > 150, late["code"]
    assert late["logs"].count(0) > 150, late["logs"]


def test_the_heuristic_reads_an_aggregate_as_all_drafted_tokens_accepted_or_not():
    h = Heuristic(kmax=8, start=4)
    h.update("d", Outcome(4, 40, 50, 0.0, 0.0, steps=10, seconds=1.0))  # all 40 accepted: +2
    assert h.choose("d").lookahead == 6
    h.update("d", Outcome(4, 39, 49, 0.0, 0.0, steps=10, seconds=1.0))  # one rejection: -1
    assert h.choose("d").lookahead == 5
    h.update("d", Outcome(4, 30, 40, 0.0, 0.0, steps=10, seconds=1.0, drafted=30))  # fewer drafted, all taken
    assert h.choose("d").lookahead == 7
