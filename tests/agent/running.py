"""A sidecar built by agent.http.serve (the same app and uvicorn settings as `specwatch serve`) running on a
loopback port in this process, for tests that need a real server and a handle on its internals."""

from __future__ import annotations

import dataclasses
import threading
import time

import httpx
import uvicorn

from agent.http.serve import Runtime, build, uvicorn_config
from agent.runtime.config import SidecarConfig
from served import free_port


class Running:
    """``with Running(config) as r:`` builds the runtime, starts its jobs and serves it; ``r.client``."""

    def __init__(self, config: SidecarConfig, runtime: Runtime | None = None):
        self.config = dataclasses.replace(config, port=free_port())
        self.runtime = runtime
        self.url = f"http://127.0.0.1:{self.config.port}"
        self.server: uvicorn.Server | None = None
        self.thread: threading.Thread | None = None

    def __enter__(self) -> "Running":
        self.runtime = self.runtime or build(self.config)
        self.runtime.start()
        self.server = uvicorn.Server(uvicorn_config(self.config, self.runtime.app))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the server did not start")
            time.sleep(0.02)
        self.client = httpx.Client(base_url=self.url, timeout=30.0)
        return self

    def stop_server(self) -> None:
        if self.server is not None and self.thread is not None and self.thread.is_alive():
            self.server.should_exit = True
            self.thread.join(10)

    def __exit__(self, *exc) -> None:
        self.client.close()
        self.stop_server()
        self.runtime.close()
