"""The sidecar `specwatch serve` runs, wired by the same function (agent/runtime/wiring.py) and started in this
process, without its HTTP server."""

from __future__ import annotations

from typing import Any

from agent.runtime import config
from agent.runtime.wiring import Wired, wire


def in_process(*, background: bool = False, **options: Any) -> Wired:
    """The sidecar of the configuration (defaults, SPECWATCH_CONFIG, SPECWATCH_* variables, then ``options``,
    named as SidecarConfig's fields), started: store, policy, drift watch, alerts, metrics and the flush,
    refit and alert jobs. ``runtime.sidecar`` steers generation; ``runtime.close()`` writes everything at
    shutdown (``runtime.close(seconds)``: within a deadline, the rest to the dead-letter file). Records are
    fed on the decoding thread (Sidecar.record), so every step's decision has seen the step before;
    ``background=True`` hands them to the sidecar's ingest worker as `specwatch serve` does (the decoding
    thread only queues them; decisions may then lag some steps: bench/hf_generate.py)."""
    return wire(config.load(overrides=options), background=background).start()
