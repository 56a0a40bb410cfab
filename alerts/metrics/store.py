"""The store's durability counts on /metrics: rows dead-lettered, flushes that failed or stalled, rows held
unwritten, spilled or lost, and late records (docs/durability.md). Every sidecar registers both collectors
beside the Metrics (agent/runtime/wiring.py)."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from storage import Store


class StoreCollector(Collector):
    """Reads the counts the store keeps; no state of its own."""

    def __init__(self, store: Store):
        self._store = store

    def describe(self) -> Iterable[Metric]:
        return self.collect()

    def collect(self) -> Iterable[Metric]:
        s = self._store
        return [
            CounterMetricFamily("specwatch_store_dead_lettered_rows",
                                "Window rows the database refused, appended to the dead-letter file.",
                                value=s.dead_lettered),
            CounterMetricFamily("specwatch_store_flush_failures",
                                "Flushes that could not reach the database; their rows stay in memory.",
                                value=s.flush_failures),
            GaugeMetricFamily("specwatch_store_unwritten_rows",
                              "Window rows held in memory and not yet in the database.", value=s.unwritten),
            CounterMetricFamily("specwatch_store_spilled_rows",
                                "Unwritten window rows let go of into the dead-letter file (a shutdown the "
                                "database did not answer, or more held than max_unwritten).", value=s.spilled),
            CounterMetricFamily("specwatch_store_lost_rows",
                                "Unwritten window rows let go of that the dead-letter file could not take "
                                "(logged instead).", value=s.lost),
            CounterMetricFamily("specwatch_store_late_records",
                                "Records counted in a later window than their timestamp.", value=s.late_records),
        ]


class FlushCollector(Collector):
    """The flush job's timing (agent/runtime/jobs.py): flushes that ran past its stall limit, and how long the running
    one has run, so a database that holds a flush shows before any error does."""

    def __init__(self, jobs):
        self._jobs = jobs

    def describe(self) -> Iterable[Metric]:
        return self.collect()

    def collect(self) -> Iterable[Metric]:
        j = self._jobs
        return [
            CounterMetricFamily("specwatch_store_flush_timeouts",
                                "Flushes that ran longer than the stall limit (the database did not answer).",
                                value=j.flush_timeouts),
            GaugeMetricFamily("specwatch_store_flush_running_seconds",
                              "How long the running flush has run; 0 when none runs.", value=j.flush_running_seconds),
        ]
