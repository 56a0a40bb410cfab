"""Fixtures of the HTTP API tests: a sidecar over a fresh SQLite store with a settable clock."""

from __future__ import annotations

import pytest

from agent.sidecar import Sidecar
from alerts.metrics import Metrics
from policies.registry import make
from sidecar_fakes import T0, Clock, open_store


@pytest.fixture
def sidecar(tmp_path):
    clock = Clock(T0 + 100)
    store = open_store(tmp_path, clock)
    s = Sidecar(store, make("heuristic+switch", seed=0), metrics=Metrics(), clock=clock)
    yield s
    store.db.dispose()

