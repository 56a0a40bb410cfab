"""The sidecar's options in groups: the small frozen objects SidecarConfig (agent/runtime/config.py) hands
out, so that each part takes one object, not a handful of loose options. SidecarConfig validates every
option under its own name (what the configuration file, SPECWATCH_* variables and flags name); each group
checks its own values too, for when it is built directly."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Intervals:
    """Seconds between runs of each scheduler job (agent/runtime/jobs.py)."""

    flush: float = 1.0
    rollup: float = 60.0
    prune: float = 3600.0
    refit: float = 1.0
    alerts: float = 15.0
    domains: float = 30.0
    fleet: float = 300.0

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name}: interval must be a positive number of seconds, got {value!r}")


@dataclass(frozen=True)
class Limits:
    """What the HTTP API refuses rather than queue without bound (agent/http/limits.py).

    ``max_unwritten``: store window rows not yet written (the database away) above which ingest is refused;
    ``generate_concurrency`` decodes at once, ``generate_queue`` more may wait for a turn; ``retry_after``:
    seconds a refused client is told to wait; ``idempotency_entries``: see agent/http/idempotency.py."""

    max_unwritten: int = 200_000
    generate_concurrency: int = 2
    generate_queue: int = 8
    retry_after: int = 1
    idempotency_entries: int = 16_384

    def __post_init__(self) -> None:
        for name, low in (("max_unwritten", 1), ("generate_concurrency", 1), ("generate_queue", 0),
                          ("retry_after", 1), ("idempotency_entries", 1)):
            value = getattr(self, name)
            if type(value) is not int or value < low:
                raise ValueError(f"{name}: must be an integer >= {low}, got {value!r}")


@dataclass(frozen=True)
class Connections:
    """What one client of the HTTP server may send and hold (agent/http/serve.py): ``body_limit`` bytes of
    a request body; ``read_timeout`` seconds to send a whole request once connected or answered;
    ``keepalive_seconds`` before an idle keep-alive connection is closed; ``max_connections`` open at once
    (more get 503)."""

    body_limit: int = 4 * 1024 * 1024
    read_timeout: float = 15.0
    keepalive_seconds: float = 5.0
    max_connections: int = 1024

    def __post_init__(self) -> None:
        _positive("connections", vars(self), whole=("body_limit", "max_connections"))


@dataclass(frozen=True)
class Domains:
    """How many domains the sidecar keeps apart (``max_domains``; more share the state of "other") and how
    long one without records stays in memory (``idle_seconds``; its history stays in the database)."""

    max_domains: int = 32
    idle_seconds: float = 3600.0

    def __post_init__(self) -> None:
        _positive("domains", vars(self), whole=("max_domains",))


def _positive(group: str, values: dict[str, object], whole: tuple[str, ...]) -> None:
    """Every value a positive number: an integer for the names in ``whole``, else finite seconds."""
    for name, value in values.items():
        if name in whole:
            if type(value) is not int or value < 1:
                raise ValueError(f"{group}.{name}: must be a positive integer, got {value!r}")
        elif type(value) not in (int, float) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{group}.{name}: must be a positive number of seconds, got {value!r}")
