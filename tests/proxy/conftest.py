"""Fixtures: fake llama.cpp engines and a proxy in front of them, each on its own loopback port."""

from __future__ import annotations

import contextlib

import pytest

from agent.proxy.config import ProxyConfig, Upstream
from agent.proxy.run import build, server_options
from agent.runtime.config import SidecarConfig
from tests.proxy.fake_engine import FakeEngine
from tests.proxy.servers import Running


@pytest.fixture
def engines():
    """``start(FakeEngine(...)) -> url``; every engine stops at the end of the test."""
    with contextlib.ExitStack() as stack:
        def start(engine: FakeEngine) -> str:
            return stack.enter_context(Running(engine.app)).url
        start.stack = stack
        yield start


@pytest.fixture
def proxy(tmp_path):
    """``make({"k4": url, ...}, **ProxyConfig options) -> (proxy url, runtime)``: the inference listener's URL;
    the admin listener's is ``runtime.admin``. Records are flushed with ``runtime.sidecar.flush()``. No
    scheduler runs (tests flush themselves)."""
    with contextlib.ExitStack() as stack:
        def make(pools: dict[str, str], policy: str = "pool-ucb", drafts: dict[str, str] | None = None,
                 max_domains: int = 32, sidecar_options: dict | None = None, **options):
            sidecar = SidecarConfig(db=f"sqlite:///{tmp_path / 'proxy.db'}", pod="test", policy=policy, seed=1,
                                    max_domains=max_domains, **(sidecar_options or {}))
            upstreams = tuple(Upstream(name, url, (drafts or {}).get(name)) for name, url in pools.items())
            options = {"health_seconds": 0.2, "connect_seconds": 1.0, "read_seconds": 5.0, **options}
            runtime = build(ProxyConfig(upstreams, sidecar=sidecar, port=0, admin_port=0, **options))
            stack.callback(runtime.sidecar.close)
            listeners = runtime.listen()  # as `specwatch proxy` binds them
            runtime.admin = listeners.url("admin")
            runtime.taken = []  # every record the proxy hands the sidecar, in order
            record = runtime.sidecar.record
            runtime.sidecar.record = lambda r: (runtime.taken.append(r), record(r))
            running = stack.enter_context(Running(runtime.app, sockets=listeners.sockets,
                                                  **server_options(runtime.config)))  # as `specwatch proxy`
            return running.url, runtime
        yield make
