"""The Sidecar fed only aggregate records (one per request, as a proxy reports them): its policy learns the
K of better goodput, from the record's step time even when the engine does not split draft from verify."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from agent.hub.sidecar import Sidecar
from alerts.watch import DriftWatch
from policies.registry import make
from specwatch_core.records import StepRecord
from sidecar_fakes import T0, Clock, FakeAlerts, open_store
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "policies"))
from synthetic_world import World  # noqa: E402 (tests/policies' world)

STEPS = 16  # steps per request


def request(world: World, domain: str, k: int, ts: float, target: str = "t1") -> StepRecord:
    """One request of STEPS steps at lookahead k as an aggregate timed by ``seconds`` alone."""
    outcomes = [world.step(k) for _ in range(STEPS)]
    return StepRecord(domain=domain, lookahead=k, steps=STEPS, accepted=sum(o.accepted for o in outcomes),
                      emitted=sum(o.emitted for o in outcomes), draft_seconds=0.0, verify_seconds=0.0,
                      seconds=sum(o.seconds for o in outcomes), target_version=target, draft_version="d1",
                      timestamp=ts, pool=f"k{k}" if k else "off")


def oracle(world: World, k: int) -> float:
    """Expected tokens per second of step time at lookahead k (Leviathan et al.)."""
    a = world.accept
    emitted = (1 - a ** (k + 1)) / (1 - a)
    return emitted / (k * world.draft_cost + world.verify_cost * (1 + world.verify_growth * k))


WORLDS = {"code": World(accept=0.9, seed=1), "logs": World(accept=0.3, draft_cost=0.3, seed=2)}


@pytest.mark.parametrize("policy", ["thompson", "sliding-ucb", "model-based+switch", "confidence-stop+switch"])
def test_a_sidecar_fed_only_aggregates_learns_the_better_k(tmp_path, policy):
    clock = Clock(T0)
    store = open_store(tmp_path, clock)
    sidecar = Sidecar(store, make(policy, kmax=4, seed=3), clock=clock)
    chosen: dict[str, list[int]] = {d: [] for d in WORLDS}
    for i in range(600):
        clock.now = T0 + i  # records stamped now: the store refuses timestamps far ahead of its clock
        for domain, world in WORLDS.items():
            k = sidecar.decide(domain).lookahead
            chosen[domain].append(k)
            sidecar.record(request(world, domain, k, T0 + i))
    for domain, world in WORLDS.items():
        best = max(oracle(world, k) for k in range(5))
        late = chosen[domain][-200:]
        mean = sum(oracle(world, k) for k in late) / len(late)
        assert mean >= 0.9 * best, (domain, policy, {k: late.count(k) for k in range(5)})
    assert chosen["code"][-200:].count(0) < 20 and chosen["logs"][-200:].count(0) > 150  # the two arms
    sidecar.flush(math.inf)
    store.db.dispose()


def test_stale_draft_fires_on_an_aggregate_stream_after_a_target_change(tmp_path):
    clock, alerts = Clock(T0), FakeAlerts()
    store = open_store(tmp_path, clock)
    sidecar = Sidecar(store, make("fixed:4", kmax=4), watch=DriftWatch(), alerts=alerts, clock=clock)
    world = World(accept=0.9, seed=4)
    for i in range(150):
        clock.now = T0 + i
        sidecar.record(request(world, "code", 4, T0 + i))
    assert alerts.calls == []
    world.accept = 0.4
    for i in range(150, 160):
        clock.now = T0 + i
        sidecar.record(request(world, "code", 4, T0 + i, target="t2"))
        if alerts.calls:
            break
    assert alerts.calls == [("handle", "StaleDraft", "code")] and i <= 152  # within 3 requests of t2
    sidecar.flush(math.inf)
    store.db.dispose()


def test_the_policy_gets_the_steps_drafted_tokens_and_time_of_an_aggregate(tmp_path):
    from policies.base import Decision, Outcome, Policy

    class Spy(Policy):
        def __init__(self):
            super().__init__(kmax=4)
            self.outcomes: list[Outcome] = []

        def choose(self, domain: str) -> Decision:
            return self.decision(4, "spy")

        def update(self, domain: str, outcome: Outcome) -> "Spy":
            self.outcomes.append(outcome)
            return self

    clock, spy = Clock(T0), Spy()
    store = open_store(tmp_path, clock)
    sidecar = Sidecar(store, spy, clock=clock)
    timed = StepRecord(domain="code", lookahead=4, steps=10, drafted=36, accepted=24, emitted=33,
                       draft_seconds=0.1, verify_seconds=0.2, seconds=0.5, target_version="t1",
                       draft_version="d1", timestamp=T0)
    sidecar.record(timed)
    sidecar.record(StepRecord(domain="code", lookahead=4, steps=10, accepted=24, emitted=33, draft_seconds=0.0,
                              verify_seconds=0.0, seconds=0.0, target_version="t1", draft_version="d1",
                              timestamp=T0))  # untimed: left out
    (o,) = spy.outcomes
    assert (o.steps, o.drafted, o.seconds, o.draft_seconds, o.verify_seconds) == (10, 36, 0.5, 0.1, 0.4)
    assert o == Outcome.of(timed)  # the hot path builds what Outcome.of would
    sidecar.flush(math.inf)
    store.db.dispose()
