"""The quick demo's steps replayed through the sidecar: the switch's transitions counted.

``fixtures/quick_demo_trace.jsonl.gz`` holds every StepRecord a `specwatch demo --quick` run on the full
kit gave its sidecar (2,556 steps: v1, then target v2 with the stale draft, then the re-distilled draft),
captured on 2026-11-26. The replay runs the demo's policy (confidence-stop+switch, seed 0) on the trace's own
clock, with the jobs the demo runs (flush and refit every second, the domains job every 30 s) and a decision
asked before each step, as the demo does. Expected: logs off once after the target update and on once after
the new draft, code and prose never off, no transition within 5 s of the one before (the flap reported was
on, off, on within 4 s). Power: the same replay with a switch without hysteresis fails it."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

from agent.hub.sidecar import Sidecar
from alerts.watch import DriftWatch
from policies.registry import make
from policies.switch import Switch, SwitchConfig
from policies.switched import Switched
from specwatch_core.records import StepRecord
from sidecar_fakes import Clock
from storage import Store

TRACE = Path(__file__).parent / "fixtures" / "quick_demo_trace.jsonl.gz"
JOBS = {"flush": 1.0, "refit": 1.0, "domains": 30.0}


def trace() -> list[StepRecord]:
    with gzip.open(TRACE, "rt") as f:
        return [StepRecord(**json.loads(line)) for line in f]


def replay(policy, tmp_path) -> list[tuple[float, str, bool]]:
    """(trace time, domain, on) of every transition, in order."""
    steps = trace()
    clock = Clock(steps[0].timestamp)
    store = Store.open(f"sqlite:///{tmp_path / 'replay.db'}", clock=clock)
    sidecar = Sidecar(store, policy, watch=DriftWatch(), clock=clock)
    seen: list[tuple[float, str, bool]] = []
    sidecar.switch.subscribe(lambda t: seen.append((clock.now, t.domain, t.speculate)))
    due = {name: clock.now + every for name, every in JOBS.items()}
    run = {"flush": sidecar.flush, "refit": sidecar.refit, "domains": sidecar.tend_domains}
    for s in steps:
        for name, at in due.items():
            if at <= s.timestamp:
                clock.now = at
                run[name]()
                due[name] = at + JOBS[name]
        clock.now = s.timestamp
        sidecar.decide(s.domain)
        sidecar.record(s)
    sidecar.flush(math.inf)
    sidecar.close()
    return seen


def check(seen: list[tuple[float, str, bool]]) -> None:
    by = {d: [(t, on) for t, dd, on in seen if dd == d] for d in ("code", "prose", "logs")}
    assert by["code"] == [] and by["prose"] == [], by
    assert [on for _, on in by["logs"]] == [False, True], by["logs"]
    times = [t for t, _, _ in seen]
    assert all(b - a >= 5.0 for a, b in zip(times, times[1:])), seen


def test_the_quick_demo_replayed_turns_logs_off_once_and_on_once(tmp_path):
    check(replay(make("confidence-stop+switch", 8, 0), tmp_path))


def test_power_a_switch_without_hysteresis_flaps_on_the_same_trace(tmp_path):
    loose = SwitchConfig(margin_off=0.0, margin_on=0.0, dwell=1, min_samples=1.0, min_baseline=1.0,
                         confidence=1e-6)
    seen = replay(Switched(make("confidence-stop", 8, 0), Switch(loose, seed=0)), tmp_path)
    try:
        check(seen)
    except AssertionError:
        return
    raise AssertionError(f"the loose switch passed: {seen}")
