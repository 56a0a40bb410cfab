"""Domains: only records create one (a made-up GET takes no slot and leaves no state anywhere), idle ones
are evicted from every branch and warm-start from the database when they return, and memory comes back
after many domains have come and gone."""

from __future__ import annotations

import gc
import itertools
import math
import tracemalloc

import pytest

from agent.hub.domains import DomainSlots
from agent.hub.sidecar import OTHER, Sidecar
from alerts.metrics.export import Metrics
from alerts.watch import DriftWatch
from policies.registry import make
from sidecar_fakes import T0, Clock, step
from storage import events
from test_sidecar import clock, store  # noqa: F401  (fixtures)
from traces import traces

IDLE = 600.0


def wired(store, clock, policy: str = "model-based+switch", **kwargs) -> Sidecar:
    return Sidecar(store, make(policy, kmax=6, seed=0), watch=DriftWatch(), metrics=Metrics(max_domains=32),
                   clock=clock, domain_idle_seconds=IDLE, **kwargs)


def no_trace(sidecar: Sidecar, domain: str) -> list[str]:
    """Where ``domain`` is still held in memory: policy, switch, watch, metrics, the sidecar's own maps."""
    return traces((sidecar.policy, sidecar.watch, sidecar.metrics, sidecar.state.slots, sidecar.state.latest,
                   sidecar.state.ready, sidecar.state.unlogged), domain, skip=(sidecar, sidecar.store))


def squat_then_real(sidecar: Sidecar) -> str:
    """32 made-up names asked for a decision, then a real domain's records: the state key it got."""
    for i in range(32):
        sidecar.decide(f"made-up-{i}")
    sidecar.record_many([step("real", 3, 2, T0 + i) for i in range(5)])
    return sidecar.state.slots.key("real")


def test_made_up_decisions_take_no_slot_and_leave_no_state(store, clock):
    sidecar = wired(store, clock)
    fresh = make("model-based+switch", kmax=6, seed=0).choose("any")
    d = sidecar.decide("made-up-x")
    assert (d.lookahead, d.speculate, d.policy) == (fresh.lookahead, fresh.speculate, fresh.policy)
    assert "unknown domain 'made-up-x'" in d.reason and fresh.reason in d.reason
    assert all("unknown domain" in sidecar.decide(f"made-up-{i}").reason for i in range(32))
    assert squat_then_real(sidecar) == "real"
    sidecar.decide("real")
    sidecar.flush(math.inf)
    assert no_trace(sidecar, "made-up-") == []
    assert traces(sidecar.metrics, "real") != []  # the real one is counted under its own name
    with store.db.read() as conn:  # nor in the decision log
        assert events.last_decision(conn, "local", "made-up-0") is None
        assert events.last_decision(conn, "local", "real") is not None


def test_the_old_admitting_read_fails_the_squatting_check(store, clock, monkeypatch):
    """The broken variant: a read that admits the domain (as decide did) lets made-up names squat."""
    monkeypatch.setattr(DomainSlots, "key", lambda self, domain: self.admit(domain, 0.0))
    assert squat_then_real(wired(store, clock)) == OTHER


def test_a_decoder_asking_before_its_first_record_gets_the_default_then_state(store, clock):
    sidecar = wired(store, clock, policy="confidence-stop+switch")
    assert sidecar.decide("code").lookahead >= 1
    assert sidecar.stop_state("code") is not None and sidecar.stop_drafting("code") is not None
    assert no_trace(sidecar, "code") == []
    sidecar.record(step("code", 3, 3, T0))
    assert sidecar.state.slots.key("code") == "code" and traces(sidecar.policy, "code") != []
    assert "unknown" not in sidecar.decide("code").reason


def test_idle_domains_are_evicted_everywhere_and_warm_start_on_return(store, clock):
    sidecar = wired(store, clock)
    sidecar.record_many([step(d, 3, 2, T0 + i) for i in range(40) for d in ("old", "busy")])
    sidecar.decide("old")
    sidecar.flush(math.inf)
    clock.now += IDLE / 2
    sidecar.record_many([step("busy", 3, 2, clock.now - 1)])
    assert sidecar.tend_domains() == ([], [])
    clock.now += IDLE / 2 + 1
    assert sidecar.tend_domains() == (["old"], [])
    assert no_trace(sidecar, "old") == []
    assert traces(sidecar.policy, "busy") != [] and sidecar.state.slots.key("busy") == "busy"
    assert "unknown domain" in sidecar.decide("old").reason
    # It comes back: a slot at once, its stored history seeds it at the next run of the job.
    sidecar.record_many([step("old", 3, 2, clock.now - 1)])
    assert "unknown" not in sidecar.decide("old").reason
    assert sidecar.tend_domains() == ([], ["old"])


def test_a_new_domain_is_not_warm_started_from_nothing(store, clock):
    sidecar = wired(store, clock)
    sidecar.record_many([step("new", 3, 2, clock.now - 1)])
    sidecar.flush(math.inf)
    assert sidecar.tend_domains() == ([], [])


def test_eviction_frees_slots_for_new_domains(store, clock):
    sidecar = wired(store, clock, max_domains=2)
    sidecar.record_many([step(d, 3, 2, T0) for d in ("a", "b")])
    sidecar.record_many([step("c", 3, 2, T0)])
    assert sidecar.state.slots.key("c") == OTHER
    clock.now += IDLE + 1
    assert sorted(sidecar.tend_domains()[0]) == ["a", "b"]
    sidecar.record_many([step("c", 3, 2, T0)])
    assert sidecar.state.slots.key("c") == "c"


def test_metrics_series_follow_the_slots_and_never_outlive_an_eviction(store, clock):
    # Before, the metrics admitted domain labels of their own, ahead of the slots and outside their lock:
    # after a burst of domains, labels of names that never got a slot (so were never evicted) stayed
    # forever (bench/faults.py row f: /metrics stuck at 1,331 series instead of 51).
    sidecar = wired(store, clock, max_domains=2)
    sidecar.record_many([step(d, 3, 2, T0) for d in ("a", "b", "c")])
    assert sorted(sidecar.metrics.labels()) == ["a", "b"]  # c shares other's state, and other's series
    sidecar.metrics.observe(step("z", 3, 2, T0))  # a record counted while its domain was being evicted
    clock.now += IDLE + 1
    assert sorted(sidecar.tend_domains()[0]) == ["a", "b"]
    assert sidecar.metrics.labels() == []


def test_idle_seconds_are_validated():
    with pytest.raises(ValueError, match="domain_idle_seconds"):
        DomainSlots(32, 0)
    assert DomainSlots(32, math.inf).idle(1e18) == []


_names = itertools.count()  # every domain of every churn is new


def churn(sidecar: Sidecar, clock: Clock, domains: int, per_round: int = 64) -> None:
    """``domains`` distinct domains, ``per_round`` at a time: a few records each, then idle and evicted."""
    for _ in range(0, domains, per_round):
        names = [f"churn-{next(_names)}" for _ in range(per_round)]
        sidecar.record_many([step(d, 3, i % 4, T0 + i) for d in names for i in range(3)])
        for d in names[:4]:
            sidecar.decide(d)
        sidecar.upkeep.export_gauges()  # what the flush does, without writing windows of 20k domains to disk
        clock.now += IDLE + 1
        sidecar.tend_domains()


def sidecar_bytes() -> int:
    """Bytes traced in the sidecar's own structures (not storage's windows: that package bounds them)."""
    gc.collect()
    snap = tracemalloc.take_snapshot().filter_traces([
        *(tracemalloc.Filter(True, f"*/agent/hub/{name}.py") for name in ("sidecar", "state", "upkeep", "domains")),
        tracemalloc.Filter(True, "*/policies/*"), tracemalloc.Filter(True, "*/alerts/*")])
    return sum(s.size for s in snap.statistics("filename"))


def in_memory_only(store, monkeypatch) -> None:
    """Storage is not under test here: records and warm-start queries skip the database."""
    monkeypatch.setattr(store, "record", lambda s: None)
    monkeypatch.setattr(store, "write_records", lambda steps: None)
    monkeypatch.setattr("agent.hub.upkeep.returning_history", lambda *args, **kwargs: {})


def measured(sidecar: Sidecar, clock: Clock, first: int, then: int) -> tuple[int, int]:
    """Sidecar bytes after ``first`` domains came and went (the baseline), and after ``then`` more."""
    tracemalloc.start()
    try:
        churn(sidecar, clock, first)
        baseline = sidecar_bytes()
        churn(sidecar, clock, then)
        return baseline, sidecar_bytes()
    finally:
        tracemalloc.stop()


SLACK = 32 * 1024  # bytes: caches and free lists of the process around the sidecar (seen: +20 KB in a full run)


def back_to_baseline(baseline: int, after: int) -> bool:
    return after <= 1.10 * baseline + SLACK


def test_memory_returns_to_baseline_after_20k_domains_came_and_went(store, clock, monkeypatch):
    in_memory_only(store, monkeypatch)
    sidecar = wired(store, clock, max_domains=64)
    # Every structure grows to its working size once (and CPython's free lists of small tuples fill).
    baseline, after = measured(sidecar, clock, 2_000, 20_000)
    assert len(sidecar.state.slots) == 0 and not (sidecar.state.latest or sidecar.state.ready or sidecar.state.unlogged)
    assert no_trace(sidecar, "churn-") == []
    assert back_to_baseline(baseline, after), (baseline, after)


def test_memory_check_catches_a_policy_that_keeps_evicted_domains(store, clock, monkeypatch):
    """The broken variant: forget that does nothing makes the same measurement grow far past 10%."""
    in_memory_only(store, monkeypatch)
    sidecar = wired(store, clock, max_domains=64)
    monkeypatch.setattr(sidecar.policy, "forget", lambda domain: sidecar.policy)
    baseline, after = measured(sidecar, clock, 640, 640)
    assert not back_to_baseline(baseline, after), (baseline, after)


def test_a_domain_in_its_first_life_keeps_its_live_switch_state(store, clock):
    # The domains job warm-starts domains admitted since its last run, for one that returns after an
    # eviction. A domain admitted in this life has no earlier life: its own stored transitions are older
    # than the switch's state when the newest is not flushed yet, and taking them turned a domain off
    # silently right after it came back on (the quick demo: logs on, on again 1.3 s later).
    sidecar = wired(store, clock)
    sidecar.record_many([step("logs", 3, 2, clock.now - 1)])
    switch = sidecar.switch
    switch._flip("logs", switch._state("logs"), False, "off: losing")
    sidecar.flush(math.inf)  # the off transition is stored
    clock.now += 5
    switch._flip("logs", switch._state("logs"), True, "on: probes pay")  # not flushed yet
    sidecar.tend_domains()
    assert switch.is_on("logs")
    # After an eviction, a return does take the state stored in its earlier life.
    switch._flip("logs", switch._state("logs"), False, "off: losing again")
    sidecar.flush(math.inf)
    clock.now += IDLE + 1
    assert sidecar.tend_domains()[0] == ["logs"]
    sidecar.record_many([step("logs", 3, 2, clock.now - 1)])
    assert sidecar.tend_domains()[1] == ["logs"] and not switch.is_on("logs")


def test_a_new_domain_is_placed_at_the_load_of_each_pool(store, clock):
    """A load-aware policy's new domain goes to its default pool while that pool has no more in flight than
    another, else to the emptier pool: a new domain's first requests, sent at once, are not all queued on
    one pool while another sits idle."""
    policy = make("pool-cap", kmax=24, seed=0).restrict((0, 24)).prefer(24)
    sidecar = Sidecar(store, policy, clock=clock)
    assert sidecar.decide("fresh", {0: 1, 24: 1}).lookahead == 24
    d = sidecar.decide("fresh", {0: 1, 24: 2})
    assert d.lookahead == 0 and "unknown domain 'fresh'" in d.reason, d.reason
    assert sidecar.decide("fresh", busy=None).lookahead == 24  # no loads: the default
