"""`specwatch proxy` as a child process in front of the real model's pools, and what the story reads off its admin
listener (alerts, the live prompt sample), plus the replayed traffic sent through it (agent/workload/replay.py).

The proxy runs with alerts evaluated every ``ALERTS_SECONDS`` (SPECWATCH_ALERTS_SECONDS; its default, 15 s, would
add up to 15 s to every detection delay) and health checks every ``health_seconds`` (a target update shows in
the pools' versions at the next check; a pool that is answering is checked every few rounds,
agent/proxy/pools.py). It keeps ``sample`` prompts per domain for ``GET /sample``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import httpx

from agent.engines.llamacpp import free_port
from agent.workload import prompts as workload
from agent.workload.mix import Schedule
from agent.workload.prompts import Prompt
from agent.workload.replay import Replay, ReplayConfig, replay
from agent.workload.requests import Sampling

ALERTS_SECONDS = 1.0
LOGS = "logs"


class ProxyProcess:
    """One `specwatch proxy` process; ``url`` is its inference listener, ``admin`` its admin one."""

    def __init__(self, upstreams: dict[str, str], db: str, log: Path, *, options: tuple[str, ...] = (),
                 health_seconds: float = 0.5, sample: int = 64, pod: str = "realdemo", policy: str | None = None):
        self.port, self.admin_port = free_port(), free_port()
        args = [a for name, url in upstreams.items() for a in ("--upstream", f"{name}={url}")]
        args += ["--db", db, "--port", str(self.port), "--admin-port", str(self.admin_port),
                 "--health-seconds", str(health_seconds), "--sample-prompts", str(sample), "--pod", pod, *options]
        args += ["--policy", policy] if policy else []
        env = {**os.environ, "SPECWATCH_ALERTS_SECONDS": str(ALERTS_SECONDS)}
        self.log = Path(log)
        self._out = open(self.log, "wb")
        self.process = subprocess.Popen([sys.executable, "-c", "from agent.cli import main; main()", "proxy", *args],
                                        stdout=self._out, stderr=subprocess.STDOUT, env=env,
                                        cwd=Path(__file__).resolve().parents[2])
        self.url, self.admin = f"http://127.0.0.1:{self.port}", f"http://127.0.0.1:{self.admin_port}"

    def wait_ready(self, pools: int, timeout: float = 120.0) -> "ProxyProcess":
        """Once /health answers and ``pools`` pools are healthy (RuntimeError naming the log otherwise)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                found = httpx.get(self.admin + "/pools", timeout=2.0).json()["pools"]
                if sum(p["healthy"] for p in found) >= pools and all(p["target_version"] for p in found):
                    return self
            except (httpx.HTTPError, ValueError, KeyError):
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"specwatch proxy did not get ready; see {self.log}")

    def pools(self) -> list[dict]:
        return httpx.get(self.admin + "/pools", timeout=5.0).json()["pools"]

    def wait_pools(self, check: Callable[[dict[str, dict]], bool], what: str, timeout: float = 60.0) -> float:
        """Wait until ``check`` holds of the pools (name -> /pools entry); the unix time it did."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if check({p["name"]: p for p in self.pools()}):
                    return time.time()
            except (httpx.HTTPError, ValueError, KeyError):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the proxy did not see {what} within {timeout:.0f} s; see {self.log}")

    def alerts(self) -> list[dict]:
        """Every alert of the run (firing and resolved), as the admin listener lists them."""
        return httpx.get(self.admin + "/alerts", params={"state": "all"}, timeout=5.0).json()["alerts"]

    def sample(self) -> dict[str, list[str]]:
        """The live prompt sample: prompt texts per domain."""
        out: dict[str, list[str]] = {}
        for line in httpx.get(self.admin + "/sample", timeout=10.0).text.splitlines():
            if line.strip():
                row = json.loads(line)
                out.setdefault(row["domain"], []).append(row["text"])
        return out

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._out.close()


def prompt_sets(domains: tuple[str, ...], split: str = "heldout") -> dict[str, list[Prompt]]:
    """The workload's prompt sets of ``domains`` (``logs``, the domain target v2 changes, among them)."""
    return {d: workload.load(d, split) for d in domains}


def send(url: str, schedule: Schedule, sets: dict[str, list[Prompt]], seconds: float, *, concurrency: int = 2,
         tokens: int = 48, seed: int = 0) -> Replay:
    """Replayed traffic through the proxy for ``seconds`` (greedy, ``tokens`` at most per answer)."""
    config = ReplayConfig(url=url, schedule=schedule, concurrency=concurrency, duration=seconds,
                          sampling=Sampling(max_tokens=tokens), seed=seed, timeout=120.0)
    return replay(config, sets)
