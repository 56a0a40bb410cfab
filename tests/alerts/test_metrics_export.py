"""alerts/metrics/export.py: exported values equal sums computed independently from the records."""

from __future__ import annotations

import math
import random

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from alerts.metrics.counts import LatencyCounts, MetricsConfig, position_totals
from alerts.metrics.export import Metrics
from specwatch_core.records import StepRecord


def step(domain="code", k=4, a=2, draft=0.004, verify=0.03) -> StepRecord:
    return StepRecord(domain=domain, lookahead=k, accepted=a, emitted=a + 1, draft_seconds=draft,
                      verify_seconds=verify, target_version="t1", draft_version="d1",
                      accepted_mask=[1] * a + [0] * (k - a))


def random_steps(n: int, seed: int = 3, domains=("code", "prose")) -> list[StepRecord]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.choice([0, 1, 3, 4, 7])
        a = 0
        while a < k and rng.random() < 0.65:
            a += 1
        out.append(step(rng.choice(domains), k, a, draft=0.001 * k, verify=rng.choice([0.0, 0.02, 0.05])))
    return out


def samples(metrics: Metrics) -> dict[tuple, float]:
    """(sample name, sorted label items) -> value, parsed back from the exposition text."""
    text = generate_latest(metrics.registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def value(got: dict, name: str, **labels) -> float:
    return got[(name, tuple(sorted(labels.items())))]


def test_counters_equal_record_sums():
    records = random_steps(2000)
    metrics = Metrics(registry=CollectorRegistry())
    for r in records:
        metrics.observe(r)
    got = samples(metrics)
    for d in ("code", "prose"):
        mine = [r for r in records if r.domain == d]
        assert value(got, "specwatch_steps_total", domain=d) == len(mine)
        assert value(got, "specwatch_draft_tokens_total", domain=d) == sum(r.lookahead for r in mine)
        assert value(got, "specwatch_accepted_tokens_total", domain=d) == sum(r.accepted for r in mine)
        assert value(got, "specwatch_emitted_tokens_total", domain=d) == sum(r.emitted for r in mine)


def test_per_position_counts_match_the_masks_up_to_the_first_rejection():
    records = random_steps(1500, seed=11)
    metrics = Metrics()
    for r in records:
        metrics.observe(r)
    got = samples(metrics)
    for d in ("code", "prose"):
        reached, accepted = {}, {}
        for r in (r for r in records if r.domain == d):
            for i, flag in enumerate(r.accepted_mask, start=1):
                reached[i] = reached.get(i, 0) + 1
                accepted[i] = accepted.get(i, 0) + flag
                if not flag:
                    break  # later positions were never verified
        for i in reached:
            assert value(got, "specwatch_reached_tokens_per_position_total", domain=d, position=str(i)) == reached[i]
            assert value(got, "specwatch_accepted_tokens_per_position_total", domain=d,
                         position=str(i)) == accepted[i]
        # Unconditional "drafted at i" (every step with K >= i) would differ: the test can tell them apart.
        drafted_at_2 = sum(1 for r in records if r.domain == d and r.lookahead >= 2)
        assert reached[2] < drafted_at_2


def test_position_totals_by_hand():
    # K=3: one step accepted 0, two accepted 2, one accepted 3. K=1: one accepted 1.
    hist = {3: [1, 0, 2, 1], 1: [0, 1]}
    assert position_totals(hist, 16) == [(1, 5, 4), (2, 3, 3), (3, 3, 1)]
    assert position_totals(hist, 2) == [(1, 5, 4), (2, 3, 3)]  # bounded


def test_domains_beyond_the_limit_count_as_other():
    metrics = Metrics(max_domains=2)
    for d in ("a", "b", "c", "d", "a"):
        metrics.observe(step(d))
    got = samples(metrics)
    steps = {dict(k[1])["domain"]: v for k, v in got.items() if k[0] == "specwatch_steps_total"}
    assert steps == {"a": 2, "b": 1, "other": 2}
    assert metrics.domain_label("zzz") == "other" and metrics.domain_label("b") == "b"
    assert len(metrics._by_domain) == 2  # the hot-path cache stays bounded


def test_window_ratio_follows_recent_tokens():
    metrics = Metrics(config=MetricsConfig(window_tokens=1000))
    for _ in range(2000):
        metrics.observe(step(k=4, a=4 if _ % 5 else 0))  # 0.8
    assert value(samples(metrics), "specwatch_acceptance_ratio", domain="code") == pytest.approx(0.8, abs=0.01)
    for _ in range(750):
        metrics.observe(step(k=4, a=1 if _ % 5 else 0))  # 0.2 for 3000 tokens: three windows
    ratio = value(samples(metrics), "specwatch_acceptance_ratio", domain="code")
    cumulative = value(samples(metrics), "specwatch_accepted_tokens_total", domain="code") / value(
        samples(metrics), "specwatch_draft_tokens_total", domain="code")
    assert ratio == pytest.approx(0.2 + 0.6 * math.exp(-3), abs=0.01)
    assert cumulative > 0.5  # the all-time ratio would hide the drop


def test_no_ratio_before_anything_was_drafted():
    metrics = Metrics()
    metrics.observe(step(k=0, a=0))
    got = samples(metrics)
    assert value(got, "specwatch_steps_total", domain="code") == 1
    assert not any(k[0] == "specwatch_acceptance_ratio" for k in got)


def test_latency_histograms_skip_steps_without_timing():
    metrics = Metrics()
    metrics.observe(step(draft=0.001, verify=0.01))   # exactly on a bucket bound: le is inclusive
    metrics.observe(step(draft=0.0, verify=0.0))      # no timing (synthesised)
    metrics.observe(step(k=0, a=0, draft=0.0, verify=0.02))  # plain target step: verify only
    got = samples(metrics)
    assert value(got, "specwatch_draft_duration_seconds_count", domain="code") == 1
    assert value(got, "specwatch_draft_duration_seconds_bucket", domain="code", le="0.001") == 1
    assert value(got, "specwatch_draft_duration_seconds_bucket", domain="code", le="0.0005") == 0
    assert value(got, "specwatch_verify_duration_seconds_count", domain="code") == 2
    assert value(got, "specwatch_verify_duration_seconds_sum", domain="code") == pytest.approx(0.03)
    assert value(got, "specwatch_verify_duration_seconds_bucket", domain="code", le="+Inf") == 2


def test_latency_buckets_are_cumulative():
    counts = LatencyCounts((0.1, 1.0))
    for s in (0.05, 0.1, 0.5, 3.0):
        counts.add(s)
    assert counts.buckets() == [("0.1", 2), ("1.0", 3), ("+Inf", 4)]


def test_decisions_drift_and_alerts():
    metrics = Metrics()
    metrics.set_decision("code", 5, True)
    metrics.set_decision("chat", 0, False)
    metrics.set_drift("code", "cusum", 3.5)
    metrics.set_alerts_firing({"AcceptanceDrift": 2})
    metrics.set_alerts_firing({"StaleDraft": 1})
    got = samples(metrics)
    assert value(got, "specwatch_lookahead", domain="code") == 5
    assert value(got, "specwatch_speculation_enabled", domain="code") == 1
    assert value(got, "specwatch_speculation_enabled", domain="chat") == 0
    assert value(got, "specwatch_drift_statistic", domain="code", detector="cusum") == 3.5
    assert value(got, "specwatch_alerts_firing", alertname="AcceptanceDrift") == 0  # resolved, series kept
    assert value(got, "specwatch_alerts_firing", alertname="StaleDraft") == 1


def test_each_instance_has_its_own_registry():
    a, b = Metrics(), Metrics()
    a.observe(step())
    assert value(samples(a), "specwatch_steps_total", domain="code") == 1
    assert not any(k[0] == "specwatch_steps_total" for k in samples(b))
    shared = CollectorRegistry()
    Metrics(registry=shared)
    with pytest.raises(ValueError):  # the same names twice on one registry
        Metrics(registry=shared)


@pytest.mark.parametrize("kwargs, message", [
    (dict(max_domains=0), "max_domains"),
    (dict(max_positions=300), "max_positions"),
    (dict(window_tokens=1), "window_tokens"),
    (dict(draft_buckets=(0.1, 0.05)), "draft_buckets"),
    (dict(verify_buckets=()), "verify_buckets"),
])
def test_config_is_validated(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MetricsConfig(**kwargs)
