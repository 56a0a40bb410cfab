"""Prometheus export of what the sidecar sees: steps, tokens, per-position acceptance, decisions, drift and
alerts, all under the ``specwatch_`` prefix in base units, with the ``domain`` label bounded.

``observe`` adds a record to plain counts (alerts/metrics/counts.py) under one lock, with no
prometheus-client call: a step costs about a microsecond whatever its lookahead, where incrementing a
labelled child per position would cost that per drafted token. A custom collector turns the counts into
metric families when /metrics is scraped. Timing convention: a record with ``verify_seconds == 0`` carries
no timing (for example one synthesised by ``specwatch scrape``) and is left out of the latency histograms.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from alerts.metrics.counts import DomainCounts, MetricsConfig, position_totals, window_ratio
from specwatch_core.records import StepRecord

OTHER = "other"

HELP = {
    "steps": "Speculative steps observed; a step with lookahead 0 is a plain target step.",
    "draft_tokens": "Drafted tokens (the sum of lookahead over steps).",
    "accepted_tokens": "Drafted tokens the target accepted; acceptance rate = accepted / drafted (all K).",
    "emitted_tokens": "Tokens emitted: accepted drafted tokens plus one bonus token per step.",
    "accepted_per_position": (
        "Drafted tokens accepted at drafted position `position` (1 = first drafted token). Acceptance is a "
        "prefix, so this counts steps that accepted at least `position` tokens: vLLM's per_pos[position-1]. "
        "Divide by specwatch_reached_tokens_per_position_total for conditional acceptance."),
    "reached_per_position": (
        "Drafted tokens reached (verified) at drafted position `position`: every earlier drafted token was "
        "accepted. Counts positions up to and including the first rejection; later drafted tokens are "
        "discarded unverified and not counted."),
    "speculation_enabled": "1 while speculation is on for the domain, 0 while the switch has it off.",
    "lookahead": "Lookahead K last decided for the domain (0 = no speculation).",
    "acceptance_ratio": "Accepted / drafted over about the last window_tokens drafted tokens (decayed).",
    "drift_statistic": "Current test statistic of a drift detector for the domain.",
    "alerts_firing": "specwatch's own alerts currently firing, per alert name.",
    "draft_seconds": "Seconds spent drafting per speculative step (steps that carry timing).",
    "verify_seconds": "Seconds of the target verification pass per step (steps that carry timing).",
}


class Metrics:
    """Counts StepRecords and decisions into Prometheus metrics registered on ``registry``.

    ``registry`` defaults to a new private CollectorRegistry (``self.registry``), so several instances
    (tests, several sidecars in one process) never clash; pass ``prometheus_client.REGISTRY`` to share the
    process default. Records are assumed valid (the store or the HTTP API validated them).
    """

    def __init__(self, registry: CollectorRegistry | None = None, max_domains: int = 32, *,
                 config: MetricsConfig | None = None):
        self.config = config or MetricsConfig(max_domains=max_domains)
        self.registry = CollectorRegistry(auto_describe=True) if registry is None else registry
        self._lock = threading.Lock()
        self._labels: dict[str, str] = {}  # admitted domains (at most max_domains)
        self._by_domain: dict[str, DomainCounts] = {}  # hot-path cache: raw domain -> its counts
        self._counts: dict[str, DomainCounts] = {}  # domain label -> counts
        self._decay = self.config.decay_table()
        self._keep = self._decay[1]
        self._decisions: dict[str, tuple[int, bool]] = {}
        self._drift: dict[tuple[str, str], float] = {}
        self._alerts: dict[str, int] = {}
        self.registry.register(_Export(self))

    # -- hot path ------------------------------------------------------------------------------------
    def observe(self, record: StepRecord, domain: str | None = None) -> None:
        """Count one record (under ``domain``, default its own): counters, per-position histogram, window
        acceptance and latencies. An aggregate of many steps (records.is_aggregate) adds its steps,
        drafted, accepted and emitted tokens to the counters and the window, nothing per position (its
        positions are unknown), and no latency (its time is not one step's)."""
        domain = record.domain if domain is None else domain
        c = self._by_domain.get(domain) or self._resolve(domain)
        k, a, verify = record.lookahead, record.accepted, record.verify_seconds
        steps, d = record.steps, record.drafted
        with self._lock:
            c.emitted += record.emitted
            if steps == 1 and (d is None or d == k):  # one step: its positions are known
                c.steps += 1
                hist = c.hist.get(k)
                if hist is None:
                    hist = c.hist[k] = [0] * (k + 1)
                hist[a] += 1
                d = k
            else:
                c.steps += steps
                d, verify = k * steps if d is None else d, 0.0
            if d:
                c.drafted += d
                c.accepted += a
                f = self._decay[d] if d < len(self._decay) else self._keep ** d
                c.window_accepted = c.window_accepted * f + a
                c.window_drafted = c.window_drafted * f + d
            if verify > 0:
                c.verify.add(verify)
                if k:
                    c.draft.add(record.draft_seconds)

    def _resolve(self, domain: str) -> DomainCounts:
        label = self.domain_label(domain)
        with self._lock:
            counts = self._counts.get(label)
            if counts is None:
                counts = self._counts[label] = DomainCounts.new(self.config)
            if label == domain:  # overflow domains stay uncached: the cache must stay bounded too
                self._by_domain[domain] = counts
            return counts

    # -- state set by the sidecar --------------------------------------------------------------------
    def domain_label(self, domain: str) -> str:
        """The domain itself while fewer than max_domains were seen, else ``other``."""
        label = self._labels.get(domain)
        if label is not None:
            return label
        if domain == OTHER:  # the shared label never takes a domain's place
            return OTHER
        with self._lock:
            if domain in self._labels:
                return self._labels[domain]
            if len(self._labels) < self.config.max_domains:
                self._labels[domain] = domain
                return domain
        return OTHER

    def set_decision(self, domain: str, lookahead: int, speculate: bool) -> None:
        label = self.domain_label(domain)
        with self._lock:
            self._decisions[label] = (int(lookahead), bool(speculate))

    def set_drift(self, domain: str, detector: str, value: float) -> None:
        label = self.domain_label(domain)
        with self._lock:
            self._drift[(label, detector)] = float(value)

    def set_alerts_firing(self, counts: dict[str, int]) -> None:
        """Firing counts per alert name; names seen before and now absent drop to 0 (series stay)."""
        with self._lock:
            for name in self._alerts:
                self._alerts[name] = 0
            self._alerts.update((name, int(n)) for name, n in counts.items())

    def labels(self) -> list[str]:
        """The domains that have series of their own."""
        with self._lock:
            return list(self._labels)

    def forget(self, domain: str) -> None:
        """Drop ``domain``'s series and free its label slot (evicted while idle). A domain counted under
        ``other`` leaves nothing of its own to drop: the shared series stay."""
        with self._lock:
            self._by_domain.pop(domain, None)
            if self._labels.pop(domain, None) != domain:
                return
            self._counts.pop(domain, None)
            self._decisions.pop(domain, None)
            for key in [k for k in self._drift if k[0] == domain]:
                del self._drift[key]

    def _snapshot(self) -> tuple[dict[str, DomainCounts], dict, dict, dict]:
        with self._lock:
            return ({label: c.snapshot() for label, c in self._counts.items()}, dict(self._decisions),
                    dict(self._drift), dict(self._alerts))


class _Export(Collector):
    """Builds the metric families from a snapshot of the counts at scrape time."""

    def __init__(self, metrics: Metrics):
        self._metrics = metrics

    def describe(self) -> Iterable[Metric]:
        return families({}, {}, {}, {}, self._metrics.config)

    def collect(self) -> Iterable[Metric]:
        return families(*self._metrics._snapshot(), self._metrics.config)


def families(counts: dict[str, DomainCounts], decisions: dict[str, tuple[int, bool]],
             drift: dict[tuple[str, str], float], alerts: dict[str, int], config: MetricsConfig) -> list[Metric]:
    """Every specwatch metric family for the given state (empty state: families without samples)."""
    def counter(name: str, key: str, labels: tuple[str, ...] = ("domain",)) -> CounterMetricFamily:
        return CounterMetricFamily(f"specwatch_{name}_total", HELP[key], labels=labels)

    steps, drafted = counter("steps", "steps"), counter("draft_tokens", "draft_tokens")
    accepted, emitted = counter("accepted_tokens", "accepted_tokens"), counter("emitted_tokens", "emitted_tokens")
    pos_accepted = counter("accepted_tokens_per_position", "accepted_per_position", ("domain", "position"))
    pos_reached = counter("reached_tokens_per_position", "reached_per_position", ("domain", "position"))
    ratio = GaugeMetricFamily("specwatch_acceptance_ratio", HELP["acceptance_ratio"], labels=["domain"])
    draft_s = HistogramMetricFamily("specwatch_draft_duration_seconds", HELP["draft_seconds"], labels=["domain"])
    verify_s = HistogramMetricFamily("specwatch_verify_duration_seconds", HELP["verify_seconds"],
                                     labels=["domain"])
    for domain, c in sorted(counts.items()):
        steps.add_metric([domain], c.steps)
        drafted.add_metric([domain], c.drafted)
        accepted.add_metric([domain], c.accepted)
        emitted.add_metric([domain], c.emitted)
        for position, reached, acc in position_totals(c.hist, config.max_positions):
            pos_reached.add_metric([domain, str(position)], reached)
            pos_accepted.add_metric([domain, str(position)], acc)
        value = window_ratio(c)
        if value is not None:
            ratio.add_metric([domain], value)
        draft_s.add_metric([domain], c.draft.buckets(), c.draft.total)
        verify_s.add_metric([domain], c.verify.buckets(), c.verify.total)

    enabled = GaugeMetricFamily("specwatch_speculation_enabled", HELP["speculation_enabled"], labels=["domain"])
    lookahead = GaugeMetricFamily("specwatch_lookahead", HELP["lookahead"], labels=["domain"])
    for domain, (k, on) in sorted(decisions.items()):
        enabled.add_metric([domain], 1.0 if on else 0.0)
        lookahead.add_metric([domain], k)
    drift_stat = GaugeMetricFamily("specwatch_drift_statistic", HELP["drift_statistic"],
                                   labels=["domain", "detector"])
    for (domain, detector), value in sorted(drift.items()):
        drift_stat.add_metric([domain, detector], value)
    firing = GaugeMetricFamily("specwatch_alerts_firing", HELP["alerts_firing"], labels=["alertname"])
    for name, n in sorted(alerts.items()):
        firing.add_metric([name], n)
    return [steps, drafted, accepted, emitted, pos_accepted, pos_reached, ratio, enabled, lookahead,
            drift_stat, firing, draft_s, verify_s]


__all__ = ["Metrics", "MetricsConfig", "OTHER", "families"]
