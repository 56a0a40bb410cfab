"""The sidecar's bounds come from its configuration: a lookahead above the configured maximum is refused."""

import pytest

from agent.http.serve import build
from agent.runtime.config import SidecarConfig
from specwatch_core.records import RecordError
from history import step


def test_serve_bounds_lookahead_by_the_configured_kmax(tmp_path):
    # Before: the store was opened with kmax = max(16, config.kmax), so K = 5..16 passed with kmax 4.
    runtime = build(SidecarConfig(db=f"sqlite:///{tmp_path / 'k.db'}", kmax=4))
    try:
        sidecar = runtime.sidecar
        sidecar.record_many([step(k=4, accepted=4, ts=None)])
        with pytest.raises(RecordError, match="record 1: lookahead: must be 0..4, got 5"):
            sidecar.record_many([step(k=4, ts=None), step(k=5, ts=None)])
    finally:
        runtime.sidecar.close()
