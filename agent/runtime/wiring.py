"""One wiring function for every sidecar specwatch runs: `specwatch serve` (agent/http/serve.py), `specwatch proxy`
(agent/proxy/run.py) and the in-process runtime (agent/hf/runtime.py) each build theirs with ``wire``, from a
SidecarConfig: the store with the configured database timeouts, the policy behind its switch, drift watch,
alert manager and metrics, the warm start, the scheduler's jobs, and the store's and the flush job's counts
on /metrics. ``Wired.close`` writes everything within a deadline; what the database has not taken by then
goes to the dead-letter file (agent/runtime/closing.py).

``wait_for_database=False`` (the proxy): the database is no start-up dependency. The store reaches it at its
first flush, and retries every flush; records are counted meanwhile, at most ``max_unwritten`` window rows
held (the oldest beyond that go to the dead-letter file); the warm start and the alert state load once it
answers.
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass, field
from typing import Any

from agent.hub.parts import Alerts, Metrics, Watch
from agent.hub.sidecar import Sidecar
from agent.runtime.closing import Closed, close_within
from agent.runtime.config import SidecarConfig
from agent.runtime.jobs import Jobs
from alerts.metrics.store import FlushCollector, StoreCollector
from policies.registry import make
from specwatch_core import redact
from storage import Store

log = logging.getLogger(__name__)


@dataclass
class Wired:
    """A sidecar and its jobs, built from ``config`` (not started). ``warmed``: domains warm-started from the
    history (filled once the database answers)."""

    config: SidecarConfig
    sidecar: Sidecar
    jobs: Jobs
    warmed: list[str] = field(default_factory=list)

    @property
    def store(self) -> Store:
        return self.sidecar.store

    @property
    def registry(self) -> Any:
        """The metrics' registry (None without the alerts package's metrics)."""
        return self.sidecar.metrics.registry if self.sidecar.metrics is not None else None

    def start(self) -> "Wired":
        self.jobs.start()
        return self

    def close(self, seconds: float | None = None) -> Closed:
        """Stop the jobs, then flush everything and persist alert state within ``seconds``; what is still
        unwritten then goes to the dead-letter file, and the Closed report says what happened. Without a
        deadline it takes as long as it takes, and a failure is raised (after the spill)."""
        closed = close_within(self.sidecar, self.jobs, seconds)
        if seconds is None:
            closed.raise_for_failure()
        return closed


def wire(config: SidecarConfig, *, background: bool = True, kmax: int | None = None,
         wait_for_database: bool = True, cap_stored_domains: bool = False) -> Wired:
    """The sidecar ``config`` describes. ``background``: records are fed by the ingest worker (else on the
    caller's thread); ``kmax``: the store's largest lookahead instead of the policy's; ``wait_for_database``:
    reach the database now (StoreError if it cannot be) or at the first flush; ``cap_stored_domains``:
    records of domains beyond ``max_domains`` are stored under ``other``, as the metrics label them (a
    domain from a client's header)."""
    remember_secrets(config)
    store = Store.open(config.db, config.store_config(kmax, bound_unwritten=not wait_for_database),
                       timeouts=config.db_timeouts, wait=wait_for_database)
    try:
        watch, alerts, metrics = components(config, store)
        domains = config.domains
        sidecar = Sidecar(store, make(config.policy, config.kmax, config.seed), watch=watch, alerts=alerts,
                          metrics=metrics, pod=config.pod, max_domains=domains.max_domains, background=background,
                          domain_idle_seconds=domains.idle_seconds, cap_stored_domains=cap_stored_domains)
        wired = Wired(config, sidecar, Jobs(sidecar, config.intervals, fleet=fleet_check()))
        if alerts is not None:
            store.when_ready(alerts.load)
        store.when_ready(lambda: _warm(wired))
    except BaseException:
        store.close(flush=False)
        raise
    if wired.registry is not None:
        wired.registry.register(StoreCollector(store))
        wired.registry.register(FlushCollector(wired.jobs))
    if not wait_for_database:
        log.info("the database is reached at the first flush; records wait in memory until it answers")
    return wired


def _warm(wired: Wired) -> None:
    wired.warmed[:] = wired.sidecar.warm_start(lookback=wired.config.warm_lookback)


def remember_secrets(config: SidecarConfig) -> None:
    """Make the token and the secrets in configured URLs unloggable (specwatch_core/redact.py)."""
    redact.remember(config.token)
    for url in (config.db, config.webhook_url, config.alertmanager_url):
        redact.remember_url(url)


def components(config: SidecarConfig, store: Store) -> tuple[Watch | None, Alerts | None, Metrics | None]:
    """The drift watch, alert manager (its stored state not loaded yet) and metrics, each where its module
    exists (None otherwise)."""
    watch = alerts = metrics = None
    if _exists("alerts.watch"):
        from alerts.watch import DriftWatch

        watch = DriftWatch()
    if _exists("alerts.manager"):
        from alerts.manager import AlertManager

        alerts = AlertManager(_sinks(config), store, pod=config.pod)
    if _exists("alerts.metrics.export"):
        from alerts.metrics.export import Metrics

        metrics = Metrics(max_domains=config.domains.max_domains)
    return watch, alerts, metrics


def _sinks(config: SidecarConfig) -> list[Any]:
    from alerts.sinks import AlertmanagerSink, LogSink, WebhookSink

    sinks: list[Any] = [LogSink()]
    if config.alertmanager_url:
        sinks.append(AlertmanagerSink(config.alertmanager_url, generator_url=config.url))
    if config.webhook_url:
        sinks.append(WebhookSink(config.webhook_url))
    return sinks


def fleet_check() -> Any:
    """The FleetOutlier check every sidecar runs on the shared history (None without the alerts package)."""
    if not _exists("alerts.fleet"):
        return None
    from alerts.fleet import FleetCheck

    return FleetCheck()


def _exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # the parent package is missing
        return False
