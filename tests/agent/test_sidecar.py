"""Sidecar: validation before anything, every branch of the data path fed, events queued for the flush."""

from __future__ import annotations

import math
import threading

import pytest

from agent.hub.sidecar import OTHER, Sidecar
from policies.base import Decision, Outcome, Policy
from policies.registry import make
from specwatch_core.records import RecordError
from sidecar_fakes import T0, Clock, FakeAlerts, FakeMetrics, FakeWatch, losing_steps, open_store, step
from storage import StatsQuery
from storage import events


class Spy(Policy):
    """Always K=2; remembers every update."""

    name = "spy"

    def __init__(self):
        super().__init__(kmax=8)
        self.updates: list[tuple[str, Outcome]] = []

    def choose(self, domain: str) -> Decision:
        return self.decision(2, f"spy for {domain}")

    def update(self, domain: str, outcome: Outcome) -> "Spy":
        self.updates.append((domain, outcome))
        return self


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def store(tmp_path, clock):
    s = open_store(tmp_path, clock)
    yield s
    s.db.dispose()


def totals(store) -> dict[str, int]:
    return {r["domain"]: r["steps"] for r in store.stats(StatsQuery(by=("domain",))).rows}


def test_a_valid_batch_reaches_every_branch(store, clock):
    policy, metrics, watch = Spy(), FakeMetrics(), FakeWatch()
    sidecar = Sidecar(store, policy, metrics=metrics, watch=watch, clock=clock)
    batch = [step("code", 4, 2, T0 + 1), step("chat", 0, 0, T0 + 2), step("code", 4, 4, T0 + 3)]
    assert sidecar.record_many(batch) == 3
    assert [d for d, _ in policy.updates] == ["code", "chat", "code"]
    assert policy.updates[0][1].accepted == 2 and policy.updates[2][1].emitted == 5
    assert metrics.observed == batch and watch.seen == batch
    sidecar.flush(math.inf)
    assert totals(store) == {"code": 2, "chat": 1}


def test_a_bad_batch_leaves_no_trace_anywhere(store, clock):
    policy, metrics, watch, alerts = Spy(), FakeMetrics(), FakeWatch(("code",)), FakeAlerts()
    sidecar = Sidecar(store, policy, metrics=metrics, watch=watch, alerts=alerts, clock=clock)
    bad = step("code", 4, 2, T0 + 3)
    bad.accepted = 5  # more than drafted
    with pytest.raises(RecordError) as info:
        sidecar.record_many([step("code", 4, 2, T0 + 1), step("code", 4, 1, T0 + 2), bad])
    assert (info.value.index, info.value.field) == (2, "accepted")
    assert policy.updates == [] and metrics.observed == [] and watch.seen == [] and alerts.calls == []
    assert sidecar.flush(math.inf) == 0 and totals(store) == {}


def test_findings_of_the_watch_become_alerts(store, clock):
    alerts = FakeAlerts()
    sidecar = Sidecar(store, Spy(), watch=FakeWatch(("code",)), alerts=alerts, clock=clock)
    sidecar.record_many([step("chat", 4, 2, T0), step("code", 4, 0, T0 + 1)])
    assert alerts.calls == [("handle", "AcceptanceDrift", "code")]


@pytest.mark.parametrize("new_draft", [True, False], ids=["new-draft", "same-models"])
def test_a_model_version_change_makes_an_off_domain_probe_more(store, clock, new_draft):
    # Off after losing steps; a step of a new draft version tells the switch its probes' memory is stale,
    # so it probes at the investigate rate (25%) instead of 5%. Power: the same step without a version
    # change leaves the rate at 5% (200 choices: ~10 probes, over 30 for 99.9% of seeds only at 25%).
    sidecar = Sidecar(store, make("fixed:4+switch", seed=1), clock=clock)
    sidecar.record_many(losing_steps("code", 400, T0))
    assert not sidecar.switch.is_on("code")
    sidecar.record(step("code", 0, 0, T0 + 5, draft="d2" if new_draft else "d1", draft_s=0.0, verify_s=0.01,
                        expected=None))
    probes = sum(sidecar.decide("code").lookahead > 0 for _ in range(200))
    assert (probes > 30) == new_draft, probes


def test_a_switch_transition_is_alerted_and_stored_by_the_flush_not_before(store, clock):
    alerts = FakeAlerts()
    sidecar = Sidecar(store, make("fixed:4+switch", seed=1), alerts=alerts, clock=clock)
    sidecar.record_many(losing_steps("code", 400, T0))
    assert not sidecar.switch.is_on("code")
    assert store.transitions() == [] and alerts.calls == []  # queued only: the hot path does no I/O
    sidecar.flush(math.inf)
    (t,) = store.transitions(until=clock.now + 1)
    assert (t.domain, t.enabled) == ("code", False) and "K=0" in t.reason
    assert ("fire", "SpeculationDisabled", "code") in alerts.calls
    choices = [sidecar.decide("code").lookahead for _ in range(100)]
    assert choices.count(0) >= 80  # off, apart from the switch's occasional probes


def test_decisions_are_written_by_the_flush_when_they_change(store, clock):
    metrics = FakeMetrics()
    sidecar = Sidecar(store, Spy(), metrics=metrics, clock=clock, pod="pod-a")
    sidecar.record_many([step("code", 2, 1, T0)])  # only records give a domain state (and decisions to log)
    d = sidecar.decide("code")
    assert (d.lookahead, d.speculate, d.policy) == (2, True, "spy")
    with store.db.read() as conn:
        assert events.last_decision(conn, "pod-a", "code") is None
    sidecar.decide("code")
    assert metrics.decisions == []  # gauges are set by the flush, off the hot path
    sidecar.flush()
    assert metrics.decisions == [("code", 2, True)]
    with store.db.read() as conn:
        stored = events.last_decision(conn, "pod-a", "code")
    assert stored is not None and stored.lookahead == 2 and stored.reason == "spy for code"


def test_domains_beyond_the_limit_share_other(store, clock):
    policy = Spy()
    sidecar = Sidecar(store, policy, clock=clock, max_domains=2)
    sidecar.record_many([step(d, 4, 1, T0 + i) for i, d in enumerate(["a", "b", "c", "d", "a"])])
    assert [d for d, _ in policy.updates] == ["a", "b", OTHER, OTHER, "a"]
    decision = sidecar.decide("zzz")
    assert decision.reason.startswith("spy for other") and "over 2 domains" in decision.reason
    sidecar.flush(math.inf)
    assert totals(store) == {"a": 2, "b": 1, "c": 1, "d": 1}  # history keeps every domain's own name


def test_warm_start_seeds_the_policy_and_restores_the_switch(tmp_path):
    clock = Clock(T0 + 3600)
    store = open_store(tmp_path, clock)
    store.write_records([step("code", 4, 3, T0 + i, pod="local") for i in range(200)]
                        + [step("code", 0, 0, T0 + i, pod="local") for i in range(50)])
    store.record_transition("chat", False, "off: losing", ts=T0 + 10)
    store.flush(math.inf)
    policy = make("model-based+switch", seed=0)
    sidecar = Sidecar(store, policy, clock=clock)
    assert sidecar.warm_start() == ["chat", "code"]
    assert policy.policy.prediction("code") is not None  # fitted from history: no warm-up cycle
    assert not sidecar.switch.is_on("chat") and sidecar.switch.is_on("code")
    cold = make("model-based+switch", seed=0)
    Sidecar(store, cold, clock=clock).warm_start(target_version="another")
    assert cold.policy.prediction("code") is None  # history of another target is not used
    store.db.dispose()


def test_version_changes_are_noted_by_the_flush(store, clock):
    sidecar = Sidecar(store, Spy(), clock=clock)
    sidecar.record_many([step("code", 4, 2, T0 + 1), step("code", 4, 2, T0 + 2, target="t2")])
    assert store.versions() == []
    sidecar.flush(math.inf)
    seen = {(v.role, v.version): v for v in store.versions()}
    assert {("target", "t1"), ("target", "t2"), ("draft", "d1")} <= set(seen)
    assert seen[("target", "t2")].first_seen <= T0 + 2


def test_a_failed_flush_keeps_events_queued_and_reports_it(store, clock, monkeypatch):
    sidecar = Sidecar(store, make("fixed:4+switch", seed=1), clock=clock)
    sidecar.record_many(losing_steps("code", 400, T0))
    real = store.record_transition

    def broken(*args, **kwargs):
        raise RuntimeError("database is locked")

    monkeypatch.setattr(store, "record_transition", broken)
    with pytest.raises(RuntimeError):
        sidecar.flush(math.inf)
    assert sidecar.flush_error == "RuntimeError: database is locked"
    monkeypatch.setattr(store, "record_transition", real)
    sidecar.flush(math.inf)
    assert sidecar.flush_error is None and len(store.transitions(until=clock.now + 1)) == 1


def test_concurrent_records_decisions_and_flushes_lose_nothing(store, clock):
    sidecar = Sidecar(store, make("heuristic+switch", seed=0), metrics=FakeMetrics(), clock=clock)
    batches = [[step(f"d{t}", 4, (i + t) % 5, T0 + i * 0.01, emitted=(i + t) % 5 + 1) for i in range(50)]
               for t in range(4) for _ in range(10)]
    stop = threading.Event()

    def flusher():
        while not stop.is_set():
            sidecar.flush(clock.now)

    def worker(mine):
        for batch in mine:
            sidecar.record_many(batch)
            sidecar.decide(batch[0].domain)

    threads = [threading.Thread(target=worker, args=(batches[t::4],)) for t in range(4)]
    f = threading.Thread(target=flusher)
    f.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    f.join()
    sidecar.flush(math.inf)
    rows = {r["domain"]: r for r in store.stats(StatsQuery(by=("domain",))).rows}
    for t in range(4):
        mine = [r for b in batches[t::4] for r in b]
        assert rows[f"d{t}"]["steps"] == len(mine)
        assert rows[f"d{t}"]["accepted"] == sum(r.accepted for r in mine)


def test_close_writes_open_windows_and_persists_alerts(tmp_path, clock):
    store = open_store(tmp_path, clock)
    alerts = FakeAlerts()
    sidecar = Sidecar(store, Spy(), alerts=alerts, clock=clock)
    sidecar.record_many([step("code", 4, 2, clock.now - 0.5)])  # its window is still open
    sidecar.close()
    assert alerts.closed
    again = open_store(tmp_path, clock)
    assert totals(again) == {"code": 1}
    again.db.dispose()


def test_tick_alerts_exports_firing_counts_and_drift(store, clock):
    metrics, alerts = FakeMetrics(), FakeAlerts()
    sidecar = Sidecar(store, Spy(), metrics=metrics, watch=FakeWatch(), alerts=alerts, clock=clock)
    sidecar.record_many([step("code", 4, 2, T0), step("code", 4, 2, T0 + 1)])
    sidecar.tick_alerts()
    sidecar.flush()
    assert alerts.ticks == 1 and metrics.firing == [{"AcceptanceDrift": 1}]
    assert metrics.drift == {("code", "count"): 2}


def test_records_without_timing_reach_everything_but_the_policy(store, clock):
    # Scraped records (draft and verify seconds both 0: the scraper cannot know costs) would make the
    # policy's goodput estimates infinite; they are still stored, counted and watched.
    policy, metrics, watch = Spy(), FakeMetrics(), FakeWatch()
    sidecar = Sidecar(store, policy, metrics=metrics, watch=watch, clock=clock)
    untimed = step("code", 4, 3, T0 + 1, draft_s=0.0, verify_s=0.0)
    plain = step("code", 0, 0, T0 + 2, draft_s=0.0, verify_s=0.010)  # timed: verify only, as K = 0 is
    sidecar.record_many([untimed, plain])
    sidecar.record(step("code", 4, 1, T0 + 3, draft_s=0.0, verify_s=0.0))
    assert [(o.lookahead, o.verify_seconds) for _, o in policy.updates] == [(0, 0.010)]
    assert len(metrics.observed) == 3 and len(watch.seen) == 3
    sidecar.flush(math.inf)
    assert totals(store) == {"code": 3}


class SlowFit(Spy):
    """Fits in three phases; ``compute`` waits for ``release`` (a fit taking as long as the test likes)."""

    def __init__(self):
        super().__init__()
        self.computing, self.release = threading.Event(), threading.Event()
        self.applied_under_lock: bool | None = None
        self.lock: threading.Lock | None = None

    def prepare_refit(self):
        def compute():
            self.computing.set()
            assert self.release.wait(10)
            return lambda: setattr(self, "applied_under_lock", self.lock.locked())
        return compute


def test_refit_computes_without_the_lock_and_swaps_under_it(store, clock):
    policy = SlowFit()
    sidecar = Sidecar(store, policy, clock=clock)
    policy.lock = sidecar.state.lock
    assert sidecar.can_refit
    fitting = threading.Thread(target=sidecar.refit)
    fitting.start()
    try:
        assert policy.computing.wait(10)
        decided = threading.Thread(target=lambda: (sidecar.decide("code"), sidecar.record(step("code", 4, 2, T0))))
        decided.start()
        decided.join(5)
        assert not decided.is_alive()  # request threads went on while the fit was being computed
    finally:
        policy.release.set()
        fitting.join(10)
    assert policy.applied_under_lock is True and len(policy.updates) == 1


def test_refit_job_of_a_switched_policy_reaches_its_fits(store, clock):
    policy = make("model-based+switch", seed=0)
    sidecar = Sidecar(store, policy, clock=clock)
    assert sidecar.can_refit and not Sidecar(store, make("heuristic+switch"), clock=clock).can_refit
    sidecar.refit()  # the scheduler is there: fits wait for it
    sidecar.record_many([step("code", k, min(k, 2), T0 + i * 0.01) for i, k in enumerate([4, 8, 0, 1] * 20)])
    assert policy.policy.prediction("code") is None
    sidecar.refit()
    assert policy.policy.prediction("code") is not None
