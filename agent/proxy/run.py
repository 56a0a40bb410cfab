"""`specwatch proxy`: build the in-process sidecar (the same store, drift watch, alerts, metrics and jobs as
`specwatch serve`, agent/serve.py) and the proxy app, bind its inference and admin listeners
(agent/proxy/listeners.py), serve both under one uvicorn server until SIGTERM/SIGINT, then flush every record
and persist alert state, as `serve` does."""

from __future__ import annotations

import gc
import logging
from dataclasses import dataclass

import uvicorn

from agent.jobs import Intervals, Jobs
from agent.proxy.app import Proxy, create_app
from agent.proxy.config import MAX_LOOKAHEAD, ProxyConfig
from agent.proxy.listeners import ListenError, Listeners, bind
from agent.proxy.metrics import ProxyMetrics
from agent.proxy.pools import Pools
from agent.proxy.versions import FileVersions
from agent.serve import components, fleet_check, run_until_signal
from agent.sidecar import Sidecar
from agent.store_metrics import StoreCollector
from common.redact import redact_url
from policies.registry import make
from storage import Store

log = logging.getLogger("specwatch.proxy")
# httptools (C parser) and uvloop: uvicorn's defaults without them are h11 and asyncio's loop, 0.15-0.25 ms more
# CPU and about 0.2 ms more latency per request (bench/proxy_overhead.py). No Server and Date headers of
# uvicorn's own (a forwarded answer carries the engine's: two Server headers otherwise), and no proxy-headers
# middleware (the proxy never reads the client's address).
SERVER_OPTIONS = dict(http="httptools", loop="uvloop", access_log=False, server_header=False, date_header=False,
                      proxy_headers=False)


@dataclass
class ProxyRuntime:
    config: ProxyConfig
    sidecar: Sidecar
    jobs: Jobs
    proxy: Proxy
    app: object

    def start(self) -> None:
        self.jobs.start()

    def listen(self) -> Listeners:
        """Bind both listeners (ListenError if one cannot be) and tell the app which is the admin one."""
        listeners = bind(self.config)
        self.app.admin_port = listeners.admin_port
        return listeners

    def close(self) -> None:
        try:
            self.jobs.shutdown(wait=True, final_flush=False)
        finally:
            self.sidecar.close()


def build(config: ProxyConfig) -> ProxyRuntime:
    """Open the store, wire the sidecar and the proxy (nothing started)."""
    sc = config.sidecar
    # A pool records at the K its engine reports (agent/proxy/pools.py), which may exceed its name's: the store
    # takes every K a pool can have.
    store = Store.open(sc.db, sc.store_config(kmax=MAX_LOOKAHEAD))
    try:
        watch, alerts, metrics = components(sc, store)
        sidecar = Sidecar(store, make(sc.policy, sc.kmax, sc.seed), watch=watch, alerts=alerts, metrics=metrics,
                          pod=sc.pod, max_domains=sc.max_domains, background=True,
                          domain_idle_seconds=sc.domain_idle_seconds)
        sidecar.warm_start(lookback=sc.warm_lookback)
    except BaseException:
        store.close(flush=False)
        raise
    jobs = Jobs(sidecar, Intervals(sc.flush_seconds, sc.rollup_seconds, sc.prune_seconds, sc.refit_seconds,
                                   sc.alerts_seconds, sc.domains_seconds, sc.fleet_seconds), fleet=fleet_check())
    registry = metrics.registry if metrics is not None else None
    if registry is not None:
        registry.register(StoreCollector(store))
    pools = Pools(config.upstreams, FileVersions(config.hash_models), timeout=min(2.0, config.connect_seconds))
    proxy = Proxy(config, sidecar, pools, ProxyMetrics(registry))
    return ProxyRuntime(config, sidecar, jobs, proxy, create_app(proxy, sc.token))


def serve(config: ProxyConfig, runtime: ProxyRuntime | None = None) -> int:
    """Run until SIGTERM/SIGINT; returns the exit code (0 after a clean shutdown). ListenError (the runtime
    closed) when a listener cannot be bound."""
    runtime = runtime or build(config)
    try:
        listeners = runtime.listen()
    except ListenError:
        runtime.close()
        raise
    # The start-up heap (sklearn, SQLAlchemy, ... about 190k objects) leaves the garbage collector's reach: a
    # full collection of it took ~80 ms on this machine, one stalled request every few thousand. What the
    # proxy allocates from now on is still collected.
    gc.collect()
    gc.freeze()
    server_config = uvicorn.Config(runtime.app, lifespan="on", log_level="info", **SERVER_OPTIONS,
                                   timeout_graceful_shutdown=max(1, int(config.shutdown_seconds / 3)))
    return run_until_signal(runtime, server_config, config.shutdown_seconds,
                            lambda: log.info("specwatch proxy on %s, admin routes on %s: pools %s, policy %s, db %s",
                                             listeners.url("inference"), listeners.url("admin"),
                                             ", ".join(f"{u.name}={u.base}" for u in config.upstreams),
                                             config.sidecar.policy, redact_url(config.sidecar.db)),
                            sockets=listeners.sockets)
