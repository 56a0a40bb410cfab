"""`specwatch serve`: build the sidecar from a SidecarConfig and run it under uvicorn until SIGTERM/SIGINT.

On the signal: uvicorn stops accepting and lets in-flight requests finish (up to a third of the budget),
then the scheduler stops, the final flush writes every window (open ones too) and queued event, the alert
manager persists its state, and the process exits 0. If that takes longer than ``shutdown_seconds`` (a
hung database), a watchdog ends the process with exit code 1 rather than overrun Kubernetes' grace period.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any

import uvicorn

from agent import generator as models
from agent.api import create_app
from agent.config import SidecarConfig
from agent.http_timeouts import timed_h11
from agent.jobs import Intervals, Jobs
from agent.limits import Limits
from agent.prompt_sampler import live_sample
from agent.ring_reader import RingCollector, RingReader
from agent.sidecar import Sidecar
from agent.store_metrics import StoreCollector
from common import redact
from policies.registry import make
from storage import Store
from storage.engine import Timeouts

log = logging.getLogger("specwatch.serve")
LOOPBACK = ("127.0.0.1", "::1", "localhost")


@dataclass
class Runtime:
    """Everything one sidecar process runs."""

    config: SidecarConfig
    sidecar: Sidecar
    jobs: Jobs
    generator: models.Generator | None
    app: Any
    warmed: list[str]
    ring: RingReader | None = None

    def start(self) -> None:
        self.jobs.start()
        if self.ring is not None:
            self.ring.start()

    def close(self) -> None:
        """Read what the step ring holds, stop the jobs, then flush everything and persist alert state
        (Sidecar.close)."""
        try:
            if self.ring is not None:
                self.ring.stop()
            self.jobs.shutdown(wait=True, final_flush=False)
        finally:
            self.sidecar.close()


def build(config: SidecarConfig, *, background: bool = True) -> Runtime:
    """Open the store, make the policy and the optional parts, warm-start, make the app (not started).
    ``background=False``: the sidecar feeds records inline, on the caller's thread (in-process decoding)."""
    remember_secrets(config)
    if config.models_configured:
        models.check(config)
    timeouts = Timeouts(config.db_connect_seconds, config.db_statement_seconds, config.db_pool_seconds)
    store = Store.open(config.db, config.store_config(), timeouts=timeouts)
    try:
        watch, alerts, metrics = components(config, store)
        sidecar = Sidecar(store, make(config.policy, config.kmax, config.seed), watch=watch, alerts=alerts,
                          metrics=metrics, pod=config.pod, max_domains=config.max_domains,
                          background=background, domain_idle_seconds=config.domain_idle_seconds)
        warmed = sidecar.warm_start(lookback=config.warm_lookback)
    except BaseException:
        store.close(flush=False)
        raise
    gen = models.Generator(sidecar) if config.models_configured else None
    jobs = Jobs(sidecar, Intervals(config.flush_seconds, config.rollup_seconds, config.prune_seconds,
                                   config.refit_seconds, config.alerts_seconds, config.domains_seconds,
                                   config.fleet_seconds), fleet=fleet_check())
    if sidecar.metrics is not None:
        sidecar.metrics.registry.register(StoreCollector(store))
    ring = RingReader(sidecar, config.ring) if config.ring else None
    if ring is not None and sidecar.metrics is not None:
        sidecar.metrics.registry.register(RingCollector(ring))
    limits = Limits(max_unwritten=config.max_unwritten, generate_concurrency=config.generate_concurrency,
                    generate_queue=config.generate_queue, idempotency_entries=config.idempotency_entries)
    app = create_app(sidecar, token=config.token, body_limit=config.body_limit, generator=gen,
                     models_configured=config.models_configured, max_new_tokens=config.max_new_tokens, ring=ring,
                     auth=config.auth, limits=limits,
                     sampler=live_sample(config.sample_prompts, config.token, "/v1/sample"))
    return Runtime(config, sidecar, jobs, gen, app, warmed, ring)


def remember_secrets(config: SidecarConfig) -> None:
    """Make the token and the secrets in configured URLs unloggable (common/redact.py)."""
    redact.remember(config.token)
    for url in (config.db, config.webhook_url, config.alertmanager_url):
        redact.remember_url(url)


def components(config: SidecarConfig, store: Store) -> tuple[Any, Any, Any]:
    """The drift watch, alert manager and metrics, each where its module exists (None otherwise)."""
    watch = alerts = metrics = None
    if _exists("alerts.watch"):
        from alerts.watch import DriftWatch

        watch = DriftWatch()
    if _exists("alerts.manager"):
        from alerts.manager import AlertManager

        alerts = AlertManager(_sinks(config), store, pod=config.pod).load()
    if _exists("alerts.metrics"):
        from alerts.metrics import Metrics

        metrics = Metrics(max_domains=config.max_domains)
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


def serve(config: SidecarConfig, runtime: Runtime | None = None) -> int:
    """Run until SIGTERM/SIGINT; returns the exit code (0 after a clean shutdown)."""
    runtime = runtime or build(config)
    if config.host not in LOOPBACK and config.token is None:
        log.warning("binding %s without a token: anyone who reaches this port can post records", config.host)
    if runtime.generator is not None:
        runtime.generator.load_in_background(lambda: models.load(config))
    return run_until_signal(runtime, uvicorn_config(config, runtime.app), config.shutdown_seconds,
                            lambda: log.info("specwatch sidecar on %s: policy %s, db %s, %d domain(s) warm-started%s",
                                             config.url, config.policy, redact.redact_url(config.db),
                                             len(runtime.warmed),
                                             f", step ring {config.ring!r}" if config.ring else ""))


def run_until_signal(runtime: Any, server_config: uvicorn.Config, shutdown_seconds: float, announce: Any,
                     sockets: list | None = None) -> int:
    """Serve ``runtime.app`` under uvicorn until SIGTERM/SIGINT, then ``runtime.close()`` (flush, persist)
    within ``shutdown_seconds`` (the watchdog ends the process otherwise); the exit code (0: clean).
    ``sockets``: bound sockets to serve instead of the config's host and port (the proxy's two listeners)."""
    server = _Server(server_config, watchdog=lambda: _watchdog(shutdown_seconds))
    # uvicorn re-raises the signal it caught once it has stopped; these handlers make that (and a second
    # signal during the final flush) harmless, so the flush always completes.
    previous = {sig: signal.signal(sig, _ignore) for sig in (signal.SIGTERM, signal.SIGINT)}
    runtime.start()
    announce()
    try:
        server.run(sockets=sockets)
    finally:
        started = time.monotonic()
        runtime.close()
        log.info("shut down cleanly in %.2f s: every record flushed, alert state persisted",
                 time.monotonic() - started)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0 if server.started or server.should_exit else 1


def uvicorn_config(config: SidecarConfig, app: Any) -> uvicorn.Config:
    """How uvicorn runs the app: the read timeout for slow clients (agent/http_timeouts.py), keep-alive
    idle timeout, a connection cap (503 beyond), and log_config=None so uvicorn's records go through the
    root logger's redacting handlers."""
    # loop="asyncio": the serve process's timeouts and limits were built and tested on asyncio's loop;
    # uvicorn's "auto" would switch to uvloop now that the proxy brings it in.
    return uvicorn.Config(app, host=config.host, port=config.port, lifespan="off", access_log=False, loop="asyncio",
                          log_level="info", log_config=None, http=timed_h11(config.read_timeout),
                          timeout_keep_alive=config.keepalive_seconds, limit_concurrency=config.max_connections,
                          timeout_graceful_shutdown=max(1, int(config.shutdown_seconds / 3)))


class _Server(uvicorn.Server):
    """uvicorn.Server that starts the shutdown watchdog when the exit signal arrives."""

    def __init__(self, config: uvicorn.Config, watchdog):
        super().__init__(config)
        self._watchdog = watchdog

    def handle_exit(self, sig: int, frame) -> None:
        if not self.should_exit:
            self._watchdog()
        super().handle_exit(sig, frame)


def _watchdog(seconds: float) -> None:
    def expire() -> None:
        log.error("shutdown took longer than %.1f s; exiting without finishing it", seconds)
        os._exit(1)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()


def _ignore(sig: int, _frame) -> None:
    log.info("signal %d during shutdown: already shutting down", sig)
