"""Every storage test runs on both backends: a SQLite file and the PostgreSQL server (a fresh schema per
test, dropped afterwards, so no tables are left behind)."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from storage import Store, StoreConfig

PG_SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def _pg_admin() -> sa.Engine | None:
    engine = sa.create_engine(PG_SERVER, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect():
            return engine
    except sa.exc.OperationalError:
        engine.dispose()
        return None


@pytest.fixture(scope="session")
def pg_admin():
    engine = _pg_admin()
    yield engine
    if engine is not None:
        engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'history.db'}"
        return
    admin = request.getfixturevalue("pg_admin")
    if admin is None:
        pytest.skip(f"PostgreSQL is not reachable at {PG_SERVER}")
    schema = f"sw_test_{uuid.uuid4().hex[:12]}"
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield f"{PG_SERVER}?options=-csearch_path%3D{schema}"
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))


class Clock:
    """A settable clock, so no test depends on the wall clock."""

    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    from history import T0

    return Clock(T0 + 30 * 86400)


@pytest.fixture
def make_store(db_url, clock):
    opened = []

    def make(backfill: bool = True, **config) -> Store:
        # Tests write history before the clock's "now" (a month back): a backfill, with the skew widened.
        config.setdefault("max_past_seconds", 400 * 86400)
        store = Store.open(db_url, StoreConfig(**config), clock=clock, backfill=backfill)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close(flush=False)


@pytest.fixture
def store(make_store):
    return make_store()
