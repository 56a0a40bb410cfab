"""`specwatch proxy`: wire the in-process sidecar (agent/runtime/wiring.py, as `specwatch serve` does, but without
waiting for the database: the proxy serves from its first second and its records wait in memory, then in the
dead-letter file, while the database is away) and the proxy app, bind its inference and admin listeners
(agent/proxy/listeners.py), serve both under one uvicorn server until SIGTERM/SIGINT, then drain requests in
flight for ``drain_seconds``, flush every record and persist alert state within ``shutdown_seconds``
(agent/runtime/lifecycle.py)."""

from __future__ import annotations

import gc
import logging
from dataclasses import dataclass

import uvicorn

from agent.runtime.closing import Closed
from agent.http.timeouts import timed_httptools
from agent.runtime.lifecycle import Shutdown, run_until_signal
from agent.proxy.app import Proxy, create_app
from agent.proxy.config import MAX_LOOKAHEAD, ProxyConfig
from agent.proxy.listeners import ListenError, Listeners, bind
from agent.proxy.metrics import ProxyMetrics
from agent.proxy.pools import Pools
from agent.proxy.versions import FileVersions
from agent.hub.sidecar import Sidecar
from agent.runtime.wiring import Wired, wire
from specwatch_core.redact import redact_url

log = logging.getLogger("specwatch.proxy")
# httptools (C parser; with a header timeout, agent/http/timeouts.py) and uvloop: uvicorn's defaults without
# them are h11 and asyncio's loop, 0.15-0.25 ms more CPU and about 0.2 ms more latency per request
# (bench/proxy_overhead.py). No Server and Date headers of uvicorn's own (a forwarded answer carries the
# engine's: two Server headers otherwise), and no proxy-headers middleware (the proxy never reads the client's
# address).
SERVER_OPTIONS = dict(loop="uvloop", access_log=False, server_header=False, date_header=False, proxy_headers=False)


@dataclass
class ProxyRuntime:
    config: ProxyConfig
    wired: Wired
    proxy: Proxy
    app: object

    @property
    def sidecar(self) -> Sidecar:
        return self.wired.sidecar

    def start(self) -> None:
        self.wired.start()

    def listen(self) -> Listeners:
        """Bind both listeners (ListenError if one cannot be) and tell the app which is the admin one."""
        listeners = bind(self.config)
        self.app.admin_port = listeners.admin_port
        return listeners

    def on_signal(self) -> None:
        self.proxy.drain_started()

    def close(self, seconds: float | None = None) -> Closed:
        return self.wired.close(seconds)


def build(config: ProxyConfig) -> ProxyRuntime:
    """Wire the sidecar and the proxy (nothing started, the database not reached yet)."""
    sc = config.sidecar
    # A pool records at the K its engine reports (agent/proxy/pools.py), which may exceed its name's: the store
    # takes every K a pool can have.
    wired = wire(sc, kmax=MAX_LOOKAHEAD, wait_for_database=False, cap_stored_domains=True)
    pools = Pools(config.upstreams, FileVersions(config.hash_models), timeout=min(2.0, config.connect_seconds))
    proxy = Proxy(config, wired.sidecar, pools, ProxyMetrics(wired.registry, wired.sidecar))
    return ProxyRuntime(config, wired, proxy, create_app(proxy, sc.token))


def server_options(config: ProxyConfig) -> dict:
    """uvicorn's settings for the proxy, besides its app and sockets: its header timeout, the drain after
    SIGTERM, SERVER_OPTIONS."""
    return dict(http=timed_httptools(config.header_seconds), timeout_graceful_shutdown=config.drain_seconds,
                **SERVER_OPTIONS)


def serve(config: ProxyConfig, runtime: ProxyRuntime | None = None) -> int:
    """Run until SIGTERM/SIGINT; returns the exit code (0 after a shutdown that lost no record). ListenError
    (the runtime closed) when a listener cannot be bound."""
    runtime = runtime or build(config)
    try:
        listeners = runtime.listen()
    except ListenError:
        runtime.close(config.shutdown_seconds)
        raise
    # The start-up heap (sklearn, SQLAlchemy, ... about 190k objects) leaves the garbage collector's reach: a
    # full collection of it took ~80 ms on this machine, one stalled request every few thousand. What the
    # proxy allocates from now on is still collected.
    gc.collect()
    gc.freeze()
    shutdown = Shutdown(drain=config.drain_seconds, close=config.shutdown_seconds)
    server_config = uvicorn.Config(runtime.app, lifespan="on", log_level="info", **server_options(config))
    return run_until_signal(runtime, server_config, shutdown,
                            lambda: log.info("specwatch proxy on %s, admin routes on %s: pools %s, policy %s, db %s",
                                             listeners.url("inference"), listeners.url("admin"),
                                             ", ".join(f"{u.name}={u.base}" for u in config.upstreams),
                                             config.sidecar.policy, redact_url(config.sidecar.db)),
                            sockets=listeners.sockets)
