"""The proxy's own metrics (besides the sidecar's per-domain ones on the same registry): requests per pool
and result, their wall time through the proxy, which pools are up, requests sent on to another pool (a
pool that could not be reached), and records stored under ``other`` (their domain over ``max_domains``).
Labels are pools (configured, so bounded) and a fixed set of results; never domains."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily

RESULTS = ("recorded", "untimed", "unreported", "refused", "engine_error", "connect_error", "timeout", "cancelled",
           "no_pool", "cut")
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class ProxyMetrics:
    def __init__(self, registry: CollectorRegistry | None = None, sidecar=None):
        self.registry = registry if registry is not None else CollectorRegistry()
        self.failovers = Counter("specwatch_proxy_failovers", "Requests sent on to another pool before any byte "
                                 "was answered: the pool they were routed to could not be reached (from_pool).",
                                 ["from_pool"], registry=self.registry)
        if sidecar is not None:
            self.registry.register(_Overflow(sidecar))
        self.requests = Counter("specwatch_proxy_requests", "Requests through the proxy by pool and result "
                                "(recorded: a record was taken from the engine's figures; unreported: the "
                                "engine sent no per-request figures, see /pools).",
                                ["pool", "result"], registry=self.registry)
        self.seconds = Histogram("specwatch_proxy_request_seconds", "Wall time of inspected requests through "
                                 "the proxy, first byte in to last byte out.", ["pool"], buckets=BUCKETS,
                                 registry=self.registry)
        self.healthy = Gauge("specwatch_proxy_pool_healthy", "1 when the pool is in rotation.", ["pool"],
                             registry=self.registry)
        self.positions = Counter("specwatch_proxy_accepted_per_position", "Verification steps whose drafted "
                                 "token at position (0-based) the target accepted, from engines that report an "
                                 "acceptance histogram per request (vLLM, SGLang).", ["pool", "position"],
                                 registry=self.registry)
        self.verified = Counter("specwatch_proxy_verified_steps", "Verification steps with drafts of those "
                                "requests (the histograms' sums): accepted_per_position / verified_steps is the "
                                "acceptance at each position.", ["pool"], registry=self.registry)
        self._children: dict[tuple[str, ...], object] = {}  # labels() takes a lock and builds a key per call

    def count(self, pool: str, result: str, seconds: float | None = None) -> None:
        counter = self._children.get((pool, result))
        if counter is None:
            counter = self._children[(pool, result)] = self.requests.labels(pool, result)
        counter.inc()
        if seconds is not None:
            histogram = self._children.get((pool,))
            if histogram is None:
                histogram = self._children[(pool,)] = self.seconds.labels(pool)
            histogram.observe(seconds)

    def count_positions(self, pool: str, per_position: tuple[int, ...], verified: int) -> None:
        """A request's per-position accepted counts and its verification steps with drafts."""
        self.verified.labels(pool).inc(verified)
        for position, accepted in enumerate(per_position):
            self.positions.labels(pool, str(position)).inc(accepted)

    def set_health(self, pools) -> None:
        for p in pools:
            self.healthy.labels(p.name).set(1 if p.healthy else 0)


class _Overflow:
    """Records stored under ``other``: their domain came when ``max_domains`` others held the slots."""

    def __init__(self, sidecar):
        self._sidecar = sidecar

    def describe(self):
        return self.collect()

    def collect(self):
        return [CounterMetricFamily("specwatch_proxy_domain_overflow", "Records stored under the domain other: "
                                    "more domains than max_domains were live.", value=self._sidecar.stored_as_other)]
