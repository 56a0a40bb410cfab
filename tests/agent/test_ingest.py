"""Ingest worker and the Sidecar's background mode: validation stays on the caller, nothing is lost."""

from __future__ import annotations

import math
import threading
import time

import pytest

from agent.hub.ingest import Ingest
from agent.hub.sidecar import Sidecar
from policies.base import Decision, Outcome, Policy
from policies.registry import make
from specwatch_core.records import RecordError
from sidecar_fakes import T0, Clock, FakeMetrics, FakeWatch, open_store, step
from storage import StatsQuery


def test_items_are_handled_in_order_and_drain_waits_for_them():
    seen: list[int] = []
    ingest = Ingest(lambda batch: (time.sleep(0.001), seen.extend(batch)))
    for i in range(500):
        ingest.put(i)
    for i in range(500, 600):
        ingest.put(i)
    assert ingest.drain(5.0)
    assert seen == list(range(600)) and ingest.pending == 0
    assert ingest.close()


def test_a_failing_batch_is_counted_and_the_worker_goes_on():
    seen: list[int] = []

    def handle(batch):
        if -1 in batch:
            raise ValueError("boom")
        seen.extend(batch)

    ingest = Ingest(handle)
    ingest.put(-1)
    assert ingest.drain(5.0)
    ingest.put(7)
    assert ingest.drain(5.0)
    assert ingest.errors == 1 and seen == [7]
    ingest.close()


def test_back_pressure_blocks_the_producer_instead_of_dropping():
    gate = threading.Event()
    seen: list[int] = []

    def handle(batch):
        gate.wait(5.0)
        seen.extend(batch)

    ingest = Ingest(handle, max_pending=4)
    done = threading.Event()

    def produce():
        for i in range(20):
            ingest.put(i)
        done.set()

    threading.Thread(target=produce, daemon=True).start()
    assert not done.wait(0.3)  # blocked: the worker holds one batch, the inbox is full
    assert ingest.drain(0.05) is False  # a drain with a timeout gives up rather than hang
    gate.set()
    assert done.wait(5.0) and ingest.drain(5.0)
    assert seen == list(range(20))
    ingest.close()


def test_closed_ingest_refuses_more():
    ingest = Ingest(lambda batch: None)
    assert ingest.close()
    with pytest.raises(RuntimeError, match="closed"):
        ingest.put(1)


@pytest.fixture
def store(tmp_path):
    s = open_store(tmp_path, Clock())
    yield s
    s.db.dispose()


def steps_by_domain(store) -> dict[str, tuple[int, int]]:
    rows = store.stats(StatsQuery(by=("domain",))).rows
    return {r["domain"]: (r["steps"], r["accepted"]) for r in rows}


def test_background_sidecar_stores_exactly_what_was_recorded(store):
    metrics, watch = FakeMetrics(), FakeWatch()
    sidecar = Sidecar(store, make("heuristic", 8), metrics=metrics, watch=watch, clock=Clock(),
                      background=True)
    batch = [step("code", 4, i % 5, T0 + i * 0.01) for i in range(300)]
    for s in batch[:200]:
        sidecar.record(s)
    assert sidecar.record_many(batch[200:]) == 100
    sidecar.flush(math.inf)  # waits for the worker: everything recorded before it is written
    assert steps_by_domain(store) == {"code": (300, sum(s.accepted for s in batch))}
    assert metrics.observed == batch and watch.seen == batch
    sidecar.close()
    assert not sidecar.ingest._thread.is_alive()


def test_background_sidecar_refuses_bad_records_and_keeps_nothing_of_them(store):
    sidecar = Sidecar(store, make("heuristic", 8), clock=Clock(), background=True)
    good = step("code", 4, 2, T0 + 1)
    bad = step("code", 4, 9, T0 + 2)  # accepted > lookahead
    with pytest.raises(RecordError, match=r"record 1: accepted"):
        sidecar.record_many([good, bad])  # the HTTP path: refused whole, on the caller's thread
    sidecar.record(bad)  # the decoding loop's path: queued, refused by the worker
    sidecar.record(good)
    sidecar.flush(math.inf)
    assert sidecar.rejected == 1
    assert steps_by_domain(store) == {"code": (1, 2)}  # only the good record recorded on its own
    sidecar.close()


def test_background_decisions_come_from_the_worker_and_never_go_missing(store):
    sidecar = Sidecar(store, make("heuristic", 8), clock=Clock(), background=True)
    first = sidecar.decide("code")  # nothing ready yet: asked directly
    assert first.lookahead >= 1
    for i in range(5):
        sidecar.record(step("code", first.lookahead, first.lookahead, T0 + i))  # all accepted: K grows
    sidecar.ingest.drain(5.0)
    assert "code" in sidecar.state.ready  # the worker readied the next decision after the batch
    ready = sidecar.decide("code")
    assert ready.lookahead > first.lookahead and "code" not in sidecar.state.ready
    assert sidecar.decide("code").lookahead == ready.lookahead  # none ready, nothing pending: asked directly
    sidecar.close()


class Counting(Policy):
    """K = 2 always; counts how often it is asked."""

    name = "counting"

    def __init__(self):
        super().__init__(kmax=8)
        self.chosen = 0

    def choose(self, domain: str) -> Decision:
        self.chosen += 1
        return self.decision(2, "counting")

    def update(self, domain: str, outcome: Outcome) -> "Counting":
        return self


def test_background_decide_never_waits_for_a_busy_worker(store):
    """While the worker holds the lock with records in hand, decide hands out the domain's latest decision at
    once; a domain never decided before asks the policy, under the lock."""
    sidecar = Sidecar(store, make("heuristic", 8), clock=Clock(), background=True)
    sidecar.take([step("code", 2, 1, T0 - 1)])  # a known domain (an unknown one has no latest decision)
    first = sidecar.decide("code")
    got: dict[str, object] = {}
    with sidecar.state.lock:  # as the worker does while it feeds a batch
        sidecar.record(step("code", 2, 1, T0))  # in the worker's hands: it waits for the lock
        for domain in ("code", "prose"):
            t = threading.Thread(target=lambda d=domain: got.__setitem__(d, sidecar.decide(d)), daemon=True)
            t.start()
            t.join(1.0)
        assert got.get("code") is first  # did not wait
        assert "prose" not in got  # a new domain waits for the policy
    t.join(5.0)
    assert got["prose"].lookahead >= 1
    sidecar.close()


def test_background_decide_with_nothing_pending_asks_the_policy_every_time(store):
    # The ring reader feeds records itself and an HTTP client may ask between batches: each call must be the
    # policy's own choice (its probes and exploration happen there), not the last one replayed.
    policy = Counting()
    sidecar = Sidecar(store, policy, clock=Clock(), background=True)
    sidecar.take([step("code", 2, 1, T0)])
    for _ in range(5):
        sidecar.decide("code")
    assert policy.chosen == 5
    sidecar.close()


def test_latest_shows_the_readied_decision_without_taking_it(store):
    sidecar = Sidecar(store, make("heuristic", 8), clock=Clock(), background=True)
    assert sidecar.latest("code") is None
    sidecar.decide("code")
    assert sidecar.latest("code") is None  # the default answer of an unknown domain is nobody's decision
    sidecar.take([step("code", 5, 0, T0 - 1)])
    first = sidecar.decide("code")
    assert sidecar.latest("code") is first
    for i in range(5):
        sidecar.record(step("code", first.lookahead, first.lookahead, T0 + i))
    sidecar.ingest.drain(5.0)
    shown = sidecar.latest("code")
    assert shown.lookahead > first.lookahead and "code" in sidecar.state.ready  # shown, still ready for the step
    assert sidecar.decide("code") is shown
    sidecar.close()


def test_close_writes_what_the_worker_still_held(tmp_path):
    slow = FakeWatch()
    original = slow.observe
    slow.observe = lambda s: (time.sleep(0.002), original(s))[1]
    sidecar = Sidecar(open_store(tmp_path, Clock()), make("heuristic", 8), watch=slow, clock=Clock(),
                      background=True)
    for i in range(200):
        sidecar.record(step("prose", 2, 1, T0 + i * 0.01))
    assert sidecar.ingest.pending > 0  # the worker is behind: close must wait for it
    sidecar.close()  # no flush before: close drains the worker, then writes open windows
    reopened = open_store(tmp_path, Clock())
    try:
        assert steps_by_domain(reopened) == {"prose": (200, 200)}
    finally:
        reopened.db.dispose()


def test_an_idle_worker_keeps_no_reference_to_its_last_batch():
    # A served sidecar after a burst: the last batch (up to a few MB of records) must not stay alive
    # while the worker waits; it pinned heap pages that never went back to the system.
    import gc
    import weakref

    class Item:
        pass

    ingest = Ingest(lambda batch: None)
    try:
        item = Item()
        alive = weakref.ref(item)
        ingest.put(item)
        del item
        assert ingest.drain(5.0)
        time.sleep(0.05)  # the worker is back to waiting
        gc.collect()
        assert alive() is None
    finally:
        ingest.close()
