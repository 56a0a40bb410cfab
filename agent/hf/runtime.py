"""The sidecar `specwatch serve` runs, built and started in this process (without its HTTP server)."""

from __future__ import annotations

from typing import Any

from agent import config, serve


def in_process(**options: Any) -> serve.Runtime:
    """``serve.build`` from the configuration (defaults, SPECWATCH_CONFIG, SPECWATCH_* variables, then
    ``options``, named as SidecarConfig's fields), started: store, policy, drift watch, alerts, metrics and the
    flush, refit and alert jobs. ``runtime.sidecar`` steers generation; ``runtime.close()`` writes everything
    at shutdown."""
    runtime = serve.build(config.load(overrides=options))
    runtime.start()
    return runtime
