"""A real ``specwatch serve --ring NAME`` process beside a benchmark: the sidecar in a process of its own,
started with the launcher the end-to-end tests use (tests/agent/served.py), and its CPU time; ``over_ring``
runs a benchmark's work through a step ring to such a process."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "agent"))

from served import Served  # noqa: E402

from agent.ring.client import RingClient  # noqa: E402
from agent.ring.deferred import DeferredRingClient  # noqa: E402


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def sidecar_process(ring: str, policy: str, seed: int, tmp: Path) -> Iterator[Served]:
    """``specwatch serve`` reading step ring ``ring`` (the caller creates it first), SQLite in ``tmp``;
    stopped with SIGTERM (so it reads out the ring and flushes) on leaving."""
    tmp.mkdir(parents=True, exist_ok=True)
    env = {"SPECWATCH_RING": ring, "SPECWATCH_POLICY": policy, "SPECWATCH_SEED": str(seed),
           "SPECWATCH_POD": "bench"}
    with Served(tmp, env=env) as served:
        try:
            yield served
        finally:
            code, _ = served.stop(timeout=30.0)
            if code != 0:
                raise RuntimeError(f"specwatch serve exited with {code}:\n{served.output()}")


def over_ring(work: Callable[[RingClient], Any], name: str, policy: str, seed: int, tmp: Path, *,
              deferred: bool = False, pod: str | None = None) -> tuple[Any, RingClient, dict[str, float]]:
    """``work(client)`` through a step ring (``deferred``: a DeferredRingClient) to a ``specwatch serve``
    process; returns what ``work`` returned, the client (closed; its counts stay) and the CPU seconds of
    the sidecar process and of the packer thread until the sidecar has read every record."""
    kind = DeferredRingClient if deferred else RingClient
    with kind(name, pod=pod) as client, sidecar_process(name, policy, seed, tmp) as served:
        before = cpu_seconds(served.proc.pid)
        out = work(client)
        if not client.drain(120.0):
            raise RuntimeError("the sidecar process did not read the ring within 120 s")
        cpu = {"sidecar": cpu_seconds(served.proc.pid) - before, "packer": getattr(client, "cpu_seconds", 0.0)}
    return out, client, cpu
