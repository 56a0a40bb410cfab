"""An evicted domain leaves the drift watch and the metrics: no state, no series, its label slot free."""

from __future__ import annotations

from prometheus_client import generate_latest

from alerts.metrics.export import OTHER, Metrics
from alerts.watch import DriftWatch
from specwatch_core.records import StepRecord


def step(domain: str, k: int = 4, a: int = 2) -> StepRecord:
    return StepRecord(domain=domain, lookahead=k, accepted=a, emitted=a + 1, draft_seconds=0.004,
                      verify_seconds=0.03, target_version="t1", draft_version="d1",
                      accepted_mask=[1] * a + [0] * (k - a))


def test_the_watch_forgets_a_domain_and_keeps_the_others():
    watch = DriftWatch()
    for _ in range(50):
        watch.observe(step("gone"))
        watch.observe(step("kept"))
    assert watch.forget("gone") is watch
    assert {d for d, _ in watch.statistics()} == {"kept"}
    assert watch.version_test("gone") is None
    watch.observe(step("gone"))  # a return starts afresh
    assert {d for d, _ in watch.statistics()} == {"gone", "kept"}


def test_metrics_drop_the_series_and_free_the_label_slot():
    metrics = Metrics(max_domains=2)
    for d in ("gone", "kept", "third"):
        metrics.observe(step(d))
    metrics.set_decision("gone", 3, True)
    metrics.set_drift("gone", "cusum", 1.5)
    assert metrics.domain_label("third") == OTHER
    metrics.forget("gone")
    text = generate_latest(metrics.registry).decode()
    assert 'domain="gone"' not in text and 'domain="kept"' in text and f'domain="{OTHER}"' in text
    assert metrics.domain_label("fourth") == "fourth"  # the freed slot goes to the next new domain


def test_forgetting_a_domain_counted_under_other_keeps_the_shared_series():
    metrics = Metrics(max_domains=1)
    metrics.observe(step("first"))
    metrics.observe(step("overflow"))
    metrics.forget("overflow")
    text = generate_latest(metrics.registry).decode()
    assert f'specwatch_steps_total{{domain="{OTHER}"}} 1.0' in text
