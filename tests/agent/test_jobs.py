"""Scheduler jobs: which run, their options, one scheduler per process, failures kept, a final flush, a flush
the database holds counted as timed out once (and no skipped run warned of every second)."""

from __future__ import annotations

import threading
import time

import pytest

from agent.hub.sidecar import Sidecar
from agent.runtime.jobs import Jobs
from agent.runtime.options import Intervals
from policies.base import Decision, Policy
from policies.registry import make
from sidecar_fakes import FakeAlerts, open_store, step
from storage import StatsQuery


class Refitting(Policy):
    name = "refitting"

    def __init__(self):
        super().__init__()
        self.refits = 0

    def choose(self, domain):
        return Decision(1, True, "", self.name)

    def update(self, domain, outcome):
        return self

    def refit(self):
        self.refits += 1


@pytest.fixture
def store(tmp_path):
    s = open_store(tmp_path, time.time)
    yield s
    s.db.dispose()


def steps_stored(store) -> int:
    return sum(r["steps"] for r in store.stats(StatsQuery(by=("domain",))).rows)


def wait_for(condition, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_jobs_run_only_where_there_is_work_with_sane_options(store):
    plain = Jobs(Sidecar(store, make("heuristic+switch")))
    assert set(plain.jobs()) == {"flush", "rollup", "prune", "domains"}  # nothing to fit
    fitted = Jobs(Sidecar(store, make("confidence-stop+switch")))
    assert set(fitted.jobs()) == {"flush", "rollup", "prune", "domains", "refit"}  # its fits run off the hot path
    assert fitted.intervals.refit <= 5  # seconds: fits are what let a policy follow a target update
    refitting = Refitting()
    wired = Jobs(Sidecar(store, refitting, alerts=FakeAlerts()), Intervals(refit=120))
    assert set(wired.jobs()) == {"flush", "rollup", "prune", "domains", "refit", "alerts"}
    wired.start()
    try:
        jobs = {j.id: j for j in wired.scheduler.get_jobs()}
        assert jobs["flush"].misfire_grace_time == 1 and jobs["refit"].misfire_grace_time == 120
        # The flush alone may start beside a running one: that run only counts a stalled flush.
        assert all(j.max_instances == (2 if name == "flush" else 1) and j.coalesce for name, j in jobs.items())
        # The first refit runs at start, not an interval later: it hands the fits to the scheduler.
        assert wait_for(lambda: refitting.refits == 1, timeout=5)
    finally:
        wired.shutdown()


def test_one_scheduler_per_process(store):
    first = Jobs(Sidecar(store, Refitting())).start()
    try:
        with pytest.raises(RuntimeError, match="already running"):
            Jobs(Sidecar(store, Refitting())).start()
    finally:
        first.shutdown()
    second = Jobs(Sidecar(store, Refitting())).start()
    second.shutdown()


def test_the_flush_job_writes_closed_windows_and_shutdown_writes_the_rest(store):
    alerts = FakeAlerts()
    policy = Refitting()
    sidecar = Sidecar(store, policy, alerts=alerts)
    jobs = Jobs(sidecar, Intervals(flush=0.1, alerts=0.1, refit=0.1)).start()
    try:
        now = time.time()
        sidecar.record_many([step("code", 4, 2, now - 60 + i) for i in range(5)])  # windows long closed
        assert wait_for(lambda: steps_stored(store) == 5)
        assert wait_for(lambda: alerts.ticks > 0 and policy.refits > 0)
        sidecar.record(step("code", 4, 2, time.time()))  # its window is open
    finally:
        jobs.shutdown()
    assert steps_stored(store) == 6


def test_a_failing_job_is_reported_and_retried(store, monkeypatch, caplog):
    sidecar = Sidecar(store, Refitting())
    calls = []

    def flaky(now=None):
        calls.append(now)
        if len(calls) == 1:
            raise RuntimeError("database is locked")

    monkeypatch.setattr(sidecar, "flush", flaky)
    jobs = Jobs(sidecar, Intervals(flush=0.1)).start()
    try:
        assert wait_for(lambda: len(calls) >= 1)
        assert wait_for(lambda: jobs.runs.get("flush", 0) >= 1 and "flush" not in jobs.errors)
    finally:
        jobs.shutdown(final_flush=False)
    assert "job flush failed: database is locked" in caplog.text


def test_a_flush_the_database_holds_is_counted_as_timed_out_once_and_reported(store, monkeypatch, caplog):
    sidecar = Sidecar(store, Refitting())
    held, calls = threading.Event(), []

    def hung(now=None):
        calls.append(now)
        held.wait(30)  # a statement waiting for a lock another connection holds

    monkeypatch.setattr(sidecar, "flush", hung)
    jobs = Jobs(sidecar, Intervals(flush=0.1), stalled_after=0.5).start()
    try:
        assert wait_for(lambda: jobs.flush_timeouts == 1)
        assert jobs.flush_running_seconds >= 0.5
        time.sleep(0.6)  # more runs come and go meanwhile: still one stall, one flush
        assert jobs.flush_timeouts == 1 and len(calls) == 1
        assert "does not answer" in jobs.errors["flush"]
    finally:
        held.set()
        jobs.shutdown(final_flush=False)
    assert caplog.text.count("a flush has run over 0.5 s") == 1
    assert "maximum number of running instances" not in caplog.text
    assert jobs.flush_running_seconds == 0.0


def test_intervals_are_validated():
    with pytest.raises(ValueError, match="flush: interval must be a positive number"):
        Intervals(flush=0)
