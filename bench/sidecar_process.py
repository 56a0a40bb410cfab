"""A real ``specwatch serve --ring NAME`` process beside a benchmark: the sidecar in a process of its own,
started with the launcher the end-to-end tests use (tests/agent/served.py), and its CPU time."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "agent"))

from served import Served  # noqa: E402


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
