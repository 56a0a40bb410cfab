"""Warm start: stored history becomes ArmStats for the current target only; last switch state restored."""

from __future__ import annotations

import pytest

from agent.hub.warm import arm_history, switch_states
from history import T0, aggregate, step
from policies.switch import Switch
from storage import Store, StoreConfig


@pytest.fixture
def store(tmp_path):
    with Store.open(f"sqlite:///{tmp_path / 'warm.db'}", clock=lambda: T0 + 3600, backfill=True) as s:
        yield s


def test_arm_history_sums_per_lookahead_and_position_for_the_current_target(store):
    records = [step("code", 4, 2, T0 + i) for i in range(10)]
    records += [step("code", 0, 0, T0 + i, verify_s=0.008) for i in range(5)]
    records += [step("code", 4, 4, T0 + i, target="t0") for i in range(7)]  # an older target: ignored
    store.write_records(records)
    store.flush(now=T0 + 3600)
    arms = {a.lookahead: a for a in arm_history(store, "t1", since=T0 - 60, now=T0 + 3600)["code"]}
    assert set(arms) == {0, 4}
    four = arms[4]
    assert (four.steps, four.emitted) == (10, 30)
    assert four.draft_seconds == pytest.approx(0.04) and four.verify_seconds == pytest.approx(0.1)
    assert four.reached == (10, 10, 10, 0) and four.accepted == (10, 10, 0, 0)
    assert (arms[0].steps, arms[0].emitted) == (5, 5) and arms[0].verify_seconds == pytest.approx(0.04)


def test_arm_history_carries_what_aggregate_records_drafted(tmp_path):
    # An n-gram pool capped at 64 drafted 95 tokens over 30 steps: history says so, not 64 x 30.
    with Store.open(f"sqlite:///{tmp_path / 'k64.db'}", StoreConfig(kmax=64), clock=lambda: T0 + 3600,
                    backfill=True) as store:
        store.write_records([aggregate("code", 64, steps=30, drafted=95, accepted=80, ts=T0 + 1, seconds=0.4),
                             aggregate("code", 64, steps=10, drafted=20, accepted=15, ts=T0 + 2, seconds=0.1,
                                       draft="d2")])
        store.flush(now=T0 + 3600)
        (arm,) = arm_history(store, "t1", since=T0 - 60, now=T0 + 3600)["code"]  # both drafts' rows, merged
    assert (arm.lookahead, arm.steps, arm.drafted, arm.emitted) == (64, 40, 115, 135)


def test_history_older_than_the_current_draft_is_not_used(store):
    store.record_versions("t1", "d0", ts=T0)
    store.write_records([step("code", 4, 4, T0 + i, draft="d0") for i in range(5)])
    store.record_versions("t1", "d1", ts=T0 + 100)
    store.write_records([step("code", 4, 1, T0 + 200 + i) for i in range(5)])
    store.flush(now=T0 + 3600)
    (arm,) = arm_history(store, "t1", "d1", since=T0 - 60, now=T0 + 3600)["code"]
    assert arm.steps == 5 and arm.accepted[0] == 5 and arm.accepted[1] == 0


def test_switch_states_and_a_restored_switch(store):
    store.record_transition("logs", False, "off: losing", ts=T0 + 10)
    store.record_transition("code", False, "off", ts=T0 + 20)
    store.record_transition("code", True, "on", ts=T0 + 30)
    states = switch_states(store)
    assert states == {"logs": False, "code": True}
    switch = Switch()
    for domain, on in states.items():
        switch.warm_start(domain, [], on)
    assert not switch.is_on("logs") and switch.is_on("code") and switch.is_on("never-seen")
