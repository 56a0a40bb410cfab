"""`specwatch serve`: build the sidecar from a SidecarConfig (agent/runtime/wiring.py) and run it under uvicorn
until SIGTERM/SIGINT (agent/runtime/lifecycle.py).

On the signal: uvicorn stops accepting and lets in-flight requests finish (up to a third of
``shutdown_seconds``), then the scheduler stops, the final flush writes every window (open ones too) and
queued event, the alert manager persists its state, and the process exits 0. What a hung database has not
taken by half of ``shutdown_seconds`` after that goes to the dead-letter file; the whole shutdown ends
within ``shutdown_seconds`` (a watchdog ends the process otherwise), inside Kubernetes' grace period.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import uvicorn

from agent.http.api import create_app
from agent.http.timeouts import timed_h11
from agent.hub.sidecar import Sidecar
from agent.ring.reader import RingCollector, RingReader
from agent.runtime import generator as models
from agent.runtime.closing import Closed
from agent.runtime.config import SidecarConfig
from agent.runtime.lifecycle import Shutdown, run_until_signal
from agent.runtime.prompt_sampler import live_sample
from agent.runtime.wiring import Wired, wire
from specwatch_core import redact

log = logging.getLogger("specwatch.serve")
LOOPBACK = ("127.0.0.1", "::1", "localhost")


@dataclass
class Runtime:
    """Everything one sidecar process runs: the wired sidecar, its models, app and step ring."""

    wired: Wired
    generator: models.Generator | None
    app: Any
    ring: RingReader | None = None

    @property
    def sidecar(self) -> Sidecar:
        return self.wired.sidecar

    def start(self) -> None:
        self.wired.start()
        if self.ring is not None:
            self.ring.start()

    def close(self, seconds: float | None = None) -> Closed:
        """Read what the step ring holds, stop the jobs, then flush everything and persist alert state
        within ``seconds`` (Wired.close)."""
        try:
            if self.ring is not None:
                self.ring.stop()
        finally:
            closed = self.wired.close(seconds)
        return closed


def build(config: SidecarConfig, *, background: bool = True) -> Runtime:
    """Wire the sidecar (agent/runtime/wiring.py: the database is reached now), make the optional parts and the app
    (nothing started). ``background=False``: the sidecar feeds records inline, on the caller's thread."""
    if config.models_configured:
        models.check(config)
    wired = wire(config, background=background)
    sidecar = wired.sidecar
    gen = models.Generator(sidecar) if config.models_configured else None
    ring = RingReader(sidecar, config.ring) if config.ring else None
    if ring is not None and wired.registry is not None:
        wired.registry.register(RingCollector(ring))
    app = create_app(sidecar, token=config.token, body_limit=config.connections.body_limit, generator=gen,
                     models_configured=config.models_configured, max_new_tokens=config.max_new_tokens, ring=ring,
                     auth=config.auth, limits=config.limits,
                     sampler=live_sample(config.sample_prompts, config.token, "/v1/sample"))
    return Runtime(wired, gen, app, ring)


def serve(config: SidecarConfig, runtime: Runtime | None = None) -> int:
    """Run until SIGTERM/SIGINT; returns the exit code (0 after a shutdown that lost no record)."""
    runtime = runtime or build(config)
    if config.host not in LOOPBACK and config.token is None:
        log.warning("binding %s without a token: anyone who reaches this port can post records", config.host)
    if runtime.generator is not None:
        runtime.generator.load_in_background(lambda: models.load(config))
    shutdown = Shutdown.within(config.shutdown_seconds)
    return run_until_signal(runtime, uvicorn_config(config, runtime.app, shutdown.drain), shutdown,
                            lambda: log.info("specwatch sidecar on %s: policy %s, db %s, %d domain(s) warm-started%s",
                                             config.url, config.policy, redact.redact_url(config.db),
                                             len(runtime.wired.warmed),
                                             f", step ring {config.ring!r}" if config.ring else ""))


def uvicorn_config(config: SidecarConfig, app: Any, drain: float | None = None) -> uvicorn.Config:
    """How uvicorn runs the app: the read timeout for slow clients (agent/http/timeouts.py), keep-alive
    idle timeout, a connection cap (503 beyond), and log_config=None so uvicorn's records go through the
    root logger's redacting handlers."""
    # loop="asyncio": the serve process's timeouts and limits were built and tested on asyncio's loop;
    # uvicorn's "auto" would switch to uvloop now that the proxy brings it in.
    connections = config.connections
    return uvicorn.Config(app, host=config.host, port=config.port, lifespan="off", access_log=False, loop="asyncio",
                          log_level="info", log_config=None, http=timed_h11(connections.read_timeout),
                          timeout_keep_alive=connections.keepalive_seconds,
                          limit_concurrency=connections.max_connections,
                          timeout_graceful_shutdown=drain or Shutdown.within(config.shutdown_seconds).drain)
