"""The store behind PgBouncer in transaction mode: no session state across transactions, so two pods'
stores share one server connection, each transaction wherever the pooler puts it."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from bench.pgbouncer import BINARY, MISSING, PgBouncer
from history import T0, random_steps
from storage import StatsQuery, Store, StoreConfig

H = 3600


@pytest.fixture
def pooled(pg_admin):
    if pg_admin is None:
        pytest.skip("PostgreSQL is not reachable")
    if BINARY is None:
        pytest.skip(MISSING)
    name = f"sw_pool_{uuid.uuid4().hex[:10]}"
    with pg_admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    bouncer = PgBouncer(pool_size=1).start()
    try:
        yield bouncer.url(name), name
    finally:
        bouncer.stop()
        with pg_admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE "{name}" WITH (FORCE)'))


def test_two_pods_share_one_server_connection(pooled, pg_admin, clock):
    url, name = pooled
    config = dict(max_past_seconds=400 * 86400)
    stores = [Store.open(url, StoreConfig(pod=pod, **config), clock=clock, backfill=True) for pod in ("a", "b")]
    records = random_steps(600, T0, 2 * H, seed=5)
    for i, second in enumerate(range(0, 2 * H, 600)):  # interleaved: each statement runs many times
        for store in stores:
            store.write_records([r for r in records if second <= r.timestamp - T0 < second + 600])
            store.flush(T0 + second + 600)
    stores[0].rollup(T0 + 3 * H)
    assert stores[1].pack(T0 + 3 * H)["window"] > 0
    stores[0].prune(T0 + 3 * H)
    got = stores[1].stats(StatsQuery(since=T0, until=T0 + 2 * H, by=("domain",)))
    assert sum(r["steps"] for r in got.rows) == len(records)
    with pg_admin.connect() as conn:
        servers = conn.execute(sa.text("SELECT count(*) FROM pg_stat_activity WHERE datname = :d"),
                               {"d": name}).scalar()
    assert servers == 1
    for store in stores:
        store.close(flush=False)
