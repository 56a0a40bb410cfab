"""The store's durability counts on /metrics: rows dead-lettered, flushes that failed, rows held unwritten
and late records (docs/durability.md). ``specwatch serve`` and ``specwatch proxy`` register one beside the
Metrics, as they do the step ring's collector."""

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
            CounterMetricFamily("specwatch_store_late_records",
                                "Records counted in a later window than their timestamp.", value=s.late_records),
        ]
