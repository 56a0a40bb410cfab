"""Fixtures of the agent tests: a sidecar over a fresh SQLite store with a settable clock; a PostgreSQL
schema of its own for tests that run `specwatch serve` on the local server (dropped afterwards)."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from agent.hub.sidecar import Sidecar
from alerts.metrics.export import Metrics
from policies.registry import make
from sidecar_fakes import T0, Clock, open_store


@pytest.fixture
def sidecar(tmp_path):
    clock = Clock(T0 + 100)
    store = open_store(tmp_path, clock)
    s = Sidecar(store, make("heuristic+switch", seed=0), metrics=Metrics(), clock=clock)
    yield s
    store.db.dispose()



PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@pytest.fixture
def schema():
    """A fresh schema on the local PostgreSQL (URL option ``-csearch_path``); skips if it is down."""
    admin = sa.create_engine(PG, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            name = f"sw_agent_{uuid.uuid4().hex[:10]}"
            conn.execute(sa.text(f'CREATE SCHEMA "{name}"'))
    except sa.exc.OperationalError:
        pytest.skip(f"PostgreSQL is not reachable at {PG}")
    yield name
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP SCHEMA "{name}" CASCADE'))
    admin.dispose()
