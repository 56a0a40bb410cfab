"""Helpers for the deploy tests: metric names a PromQL expression selects, and the names specwatch exports."""

from __future__ import annotations

import random
import re
import shutil
import time
from types import SimpleNamespace

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from agent.ring.reader import RingCollector, RingReader
from alerts.metrics.export import Metrics
from alerts.metrics.store import FlushCollector, StoreCollector
from specwatch_core.records import StepRecord

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not on PATH (Debian: apt-get install prometheus; CI installs it)")

# Words that look like metric names in PromQL but are operators, aggregations or modifiers.
KEYWORDS = {"sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile",
            "count_values", "group", "by", "without", "on", "ignoring", "group_left", "group_right", "and",
            "or", "unless", "bool", "offset", "inf", "nan"}
# Series Prometheus itself provides.
BUILTIN = {"up", "ALERTS", "ALERTS_FOR_STATE"}


def metric_names(expr: str) -> set[str]:
    """Metric names selected in a PromQL (or Grafana-templated PromQL) expression."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)  # string literals
    s = re.sub(r"\$\{[^}]*\}|\$\w+", "", s)  # Grafana variables
    s = re.sub(r"\{[^}]*\}", "", s)  # label matchers
    s = re.sub(r"\[[^\]]*\]", "", s)  # ranges and subqueries
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", s)  # label lists
    names = set()
    for m in re.finditer(r"(?<![\w.:])[A-Za-z_:][\w:]*", s):  # not the unit of a duration like 30m
        if s[m.end():].lstrip().startswith("(") or m.group().lower() in KEYWORDS:
            continue
        names.add(m.group())
    return names


def realistic_records(n: int = 3000, seed: int = 7) -> list[StepRecord]:
    """Steps of three domains with K in 0..6, a prefix-accept mask, and timing on most of them, stamped over
    the last minutes (a store refuses timestamps outside its clock's skew)."""
    rng = random.Random(seed)
    start = time.time() - n / 50 - 60
    rates = {"code": 0.8, "prose": 0.6, "chat": 0.45}
    records = []
    for i in range(n):
        domain = rng.choice(sorted(rates))
        k = rng.choice([0, 2, 3, 4, 4, 5, 6])
        a = 0
        while a < k and rng.random() < rates[domain]:
            a += 1
        timed = i % 10 != 0  # every tenth step carries no timing (verify_seconds 0)
        records.append(StepRecord(
            domain=domain, lookahead=k, accepted=a, emitted=a + 1,
            draft_seconds=0.0015 * k * rng.uniform(0.8, 1.3) if timed else 0.0,
            verify_seconds=rng.uniform(0.02, 0.09) if timed else 0.0,
            target_version="t-1f2e", draft_version="d-9a8b", accepted_mask=[1] * a + [0] * (k - a),
            timestamp=start + i / 50))
    return records


def populated_metrics(records: list[StepRecord] | None = None) -> Metrics:
    """A Metrics with records observed and every gauge set, so every family has samples."""
    metrics = Metrics()
    for record in records or realistic_records():
        metrics.observe(record)
    metrics.set_decision("code", 5, True)
    metrics.set_decision("chat", 0, False)
    metrics.set_drift("code", "cusum", 2.5)
    metrics.set_drift("prose", "adwin", 0.0)
    metrics.set_alerts_firing({"AcceptanceDrift": 1, "BelowBreakEven": 0})
    metrics.registry.register(RingCollector(RingReader(None, "specwatch-never-created")))  # serve --ring's
    # The store's and the flush job's counts, as agent/runtime/wiring.py registers them beside the Metrics.
    metrics.registry.register(StoreCollector(SimpleNamespace(dead_lettered=0, flush_failures=2, unwritten=5,
                                                             late_records=0, spilled=0, lost=0)))
    metrics.registry.register(FlushCollector(SimpleNamespace(flush_timeouts=1, flush_running_seconds=0.0)))
    return metrics


def exported_names() -> set[str]:
    """Sample names specwatch's exporter produces (histograms: _bucket, _sum, _count)."""
    text = generate_latest(populated_metrics().registry).decode()
    names = set()
    for family in text_string_to_metric_families(text):
        assert family.samples, f"{family.name} has no samples; set it in populated_metrics()"
        names.update(s.name for s in family.samples)
    return names
