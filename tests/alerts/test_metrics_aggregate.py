"""alerts/metrics/export.py with aggregate records: counters count their sums, nothing per position, no latency."""

from __future__ import annotations

import random

import pytest

from alerts.metrics.export import Metrics
from specwatch_core.records import drafted_of, is_aggregate
from history import aggregate
from test_metrics_export import random_steps, samples, step, value


def mixed(n: int, seed: int = 5):
    rng = random.Random(seed)
    out = random_steps(n, seed=seed)
    for _ in range(n // 4):
        k, steps = rng.choice([0, 3, 4]), rng.randint(1, 40)
        drafted = rng.randint(0, k * steps)
        accepted = rng.randint(0, drafted)
        out.append(aggregate(rng.choice(["code", "prose"]), k, steps=steps, drafted=drafted, accepted=accepted,
                             emitted=accepted + steps - rng.randint(0, min(accepted, 1)), seconds=None,
                             draft_s=0.001 * steps, verify_s=0.02 * steps).validate())  # split: still no latency
    rng.shuffle(out)
    return out


def test_counters_equal_the_sums_of_per_step_and_aggregate_records():
    records = mixed(2000)
    metrics = Metrics()
    for r in records:
        metrics.observe(r)
    got = samples(metrics)
    for d in ("code", "prose"):
        mine = [r for r in records if r.domain == d]
        assert value(got, "specwatch_steps_total", domain=d) == sum(r.steps for r in mine)
        assert value(got, "specwatch_draft_tokens_total", domain=d) == sum(drafted_of(r) for r in mine)
        assert value(got, "specwatch_accepted_tokens_total", domain=d) == sum(r.accepted for r in mine)
        assert value(got, "specwatch_emitted_tokens_total", domain=d) == sum(r.emitted for r in mine)
        # per position and latency: the per-step records alone
        alone = Metrics()
        for r in mine:
            if not is_aggregate(r):
                alone.observe(r)
        only = samples(alone)
        for key, v in only.items():
            if "position" in key[0] or "seconds" in key[0]:
                assert got[key] == v, key
        assert value(got, "specwatch_verify_duration_seconds_count", domain=d) == sum(
            1 for r in mine if not is_aggregate(r) and r.verify_seconds > 0)


def test_an_aggregate_moves_the_window_ratio_by_its_drafted_tokens():
    metrics = Metrics()
    for _ in range(2000):
        metrics.observe(step(k=4, a=4 if _ % 5 else 0))  # 0.8 over 8000 drafted tokens
    for _ in range(30):
        metrics.observe(aggregate("code", 4, steps=25, drafted=100, accepted=20))  # 0.2 for 3000 tokens
    ratio = value(samples(metrics), "specwatch_acceptance_ratio", domain="code")
    assert ratio == pytest.approx(0.2 + 0.6 * 2.718281828 ** -3, abs=0.01)
