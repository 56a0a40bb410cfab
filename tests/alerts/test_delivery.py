"""Delivery to one sink: retries with back-off until the sink recovers, nothing lost, newest state wins,
a hanging sink blocks neither the caller nor other sinks, bounded queue, refused batches, draining."""

import threading
from dataclasses import replace

import pytest

from alerts.alert import Alert
from alerts.config import AlertConfig
from alerts.delivery import Delivery
from alerts.manager import AlertManager
from alerts.sinks.base import RejectedError
from alert_fakes import T0, Clock, RecordingSink

FAST = AlertConfig(retry_initial_seconds=0.001, retry_max_seconds=0.004)


def alert(domain: str, name: str = "AcceptanceDrift", start: float = T0, end: float | None = None) -> Alert:
    labels = {"alertname": name, "domain": domain, "severity": "warning", "pod": "p"}
    return Alert(labels, {"summary": domain}, start, end)


@pytest.fixture
def closing():
    opened = []
    yield opened.append
    for delivery in opened:
        delivery.close(timeout=2)


def test_retry_delay_doubles_up_to_the_cap():
    config = AlertConfig(retry_initial_seconds=0.5, retry_max_seconds=10, retry_multiplier=2)
    assert [config.retry_delay(n) for n in range(1, 8)] == [0.5, 1, 2, 4, 8, 10, 10]
    assert config.retry_delay(10_000) == 10  # no overflow far out


def test_failing_sink_retries_then_delivers_everything_in_order(closing):
    sink = RecordingSink(fail_times=5)
    delivery = Delivery(sink, FAST)
    closing(delivery)
    delivery.submit([alert("a"), alert("b")])
    delivery.submit([alert("c")])
    assert delivery.wait_idle(timeout=10)
    assert [a.labels["domain"] for a in sink.sent] == ["a", "b", "c"]
    assert delivery.stats.failures == 5 and delivery.stats.delivered == 3 and not delivery.failing


def test_newest_state_of_an_alert_wins_while_the_sink_is_down(closing):
    gate = threading.Event()
    sink = RecordingSink(gate=gate)
    delivery = Delivery(sink, FAST)
    closing(delivery)
    delivery.submit([alert("first")])  # taken by the worker, which now waits on the gate
    firing, other = alert("a"), alert("b")
    delivery.submit([firing, other])
    delivery.submit([replace(firing, ends_at=T0 + 60)])  # resolved before it could be sent
    again = alert("a", start=T0 + 120)  # a new occurrence: both must arrive, in order
    delivery.submit([again])
    gate.set()
    assert delivery.wait_idle(timeout=10)
    assert [(a.labels["domain"], a.state, a.starts_at) for a in sink.sent] == [
        ("first", "firing", T0), ("b", "firing", T0), ("a", "resolved", T0), ("a", "firing", T0 + 120)]


def test_a_hanging_sink_blocks_neither_the_caller_nor_other_sinks():
    gate = threading.Event()
    stuck, healthy = RecordingSink("stuck", gate=gate), RecordingSink("healthy")
    clock = Clock(T0)
    manager = AlertManager([stuck, healthy], pod="p", clock=clock)
    try:
        for i in range(3):
            manager.fire("AcceptanceDrift", f"d{i}")
            manager.tick(T0 + i)  # returns while `stuck` is still inside send()
        assert not gate.is_set() and manager.deliveries[1].wait_idle(timeout=10)
        assert len(healthy.sent) == 3 and stuck.sent == []
    finally:
        gate.set()
        manager.close(timeout=5)
    assert len(stuck.sent) == 3 and stuck.closed


def test_full_queue_drops_firing_states_first(closing):
    gate = threading.Event()
    sink = RecordingSink(gate=gate)
    delivery = Delivery(sink, replace(FAST, queue_size=3))
    closing(delivery)
    delivery.submit([alert("in-flight")])
    while delivery.stats.delivered == 0 and sink.attempts == 0:
        threading.Event().wait(0.001)  # until the worker holds it
    delivery.submit([alert("r1", end=T0 + 1), alert("f1"), alert("r2", end=T0 + 2), alert("f2")])
    assert delivery.stats.dropped == 1
    gate.set()
    assert delivery.wait_idle(timeout=10)
    assert [a.labels["domain"] for a in sink.sent] == ["in-flight", "r1", "r2", "f2"]


class Refusing(RecordingSink):
    refusals = 0

    def send(self, alerts):
        if any(a.labels["domain"] == "bad" for a in alerts):
            self.refusals += 1
            raise RejectedError("HTTP 400")
        super().send(alerts)


def test_a_refused_batch_is_dropped_not_retried(closing):
    sink = Refusing()
    delivery = Delivery(sink, replace(FAST, max_batch=1))
    closing(delivery)
    delivery.submit([alert("bad"), alert("good")])
    assert delivery.wait_idle(timeout=10)
    assert sink.refusals == 1 and delivery.stats.rejected == 1 and sink.states() == [
        ("AcceptanceDrift", "good", "firing")]


def test_close_gives_up_on_a_dead_sink_within_the_timeout():
    sink = RecordingSink(fail_times=10**9)
    delivery = Delivery(sink, replace(FAST, retry_initial_seconds=0.05, retry_max_seconds=0.05))
    delivery.submit([alert("a")])
    assert delivery.close(timeout=0.3) is False
    assert delivery.stats.failures >= 1 and delivery.stats.delivered == 0 and delivery.pending == 1


def test_close_drains_what_is_queued():
    sink = RecordingSink(fail_times=2)
    delivery = Delivery(sink, FAST)
    delivery.submit([alert(f"d{i}") for i in range(250)])
    assert delivery.close(timeout=10) is True
    assert len(sink.sent) == 250 and max(len(b) for b in sink.batches) == FAST.max_batch and sink.closed
