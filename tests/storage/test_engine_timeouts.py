"""Database timeouts: a statement that runs too long is cancelled, a server that accepts and never answers
fails the connect, SQLite waits for the write lock only as long as configured."""

from __future__ import annotations

import socket
import threading

import pytest
import sqlalchemy as sa

from storage import StoreError
from storage.engine import Database, Timeouts

PG = "postgresql://postgres@127.0.0.1:5432/test"


def pg_or_skip() -> None:
    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=1):
            pass
    except OSError:
        pytest.skip("PostgreSQL is not reachable at 127.0.0.1:5432")


def test_a_statement_over_the_timeout_is_cancelled_on_postgresql():
    pg_or_skip()
    db = Database.open(PG, timeouts=Timeouts(statement=0.3))
    try:
        with pytest.raises(StoreError, match="statement timeout"):
            with db.read() as conn:
                conn.execute(sa.text("SELECT pg_sleep(5)"))
    finally:
        db.dispose()


def test_the_statement_timeout_keeps_options_the_url_sets():
    pg_or_skip()
    db = Database.open(f"{PG}?options=-csearch_path%3Dsomewhere", timeouts=Timeouts(statement=0.75))
    try:
        with db.read() as conn:
            assert conn.execute(sa.text("SHOW statement_timeout")).scalar() == "750ms"
            assert conn.execute(sa.text("SHOW search_path")).scalar() == "somewhere"
    finally:
        db.dispose()


def test_a_server_that_accepts_and_never_answers_fails_the_connect():
    hole = socket.create_server(("127.0.0.1", 0))
    held = []
    threading.Thread(target=lambda: [held.append(hole.accept()) for _ in range(4)], daemon=True).start()
    db = Database.open(f"postgresql://postgres:pw@127.0.0.1:{hole.getsockname()[1]}/test",
                       timeouts=Timeouts(connect=1))
    try:
        with pytest.raises(StoreError, match="timeout"):
            with db.read():
                pass
    finally:
        db.dispose()
        hole.close()


def test_sqlite_waits_for_the_write_lock_as_long_as_the_statement_timeout(tmp_path):
    db = Database.open(f"sqlite:///{tmp_path / 'x.db'}", timeouts=Timeouts(statement=0.2))
    try:
        with db.read() as conn:
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 200
    finally:
        db.dispose()


@pytest.mark.parametrize("field", ["connect", "statement", "pool"])
def test_timeouts_must_be_positive_seconds(field):
    with pytest.raises(ValueError, match=f"timeouts.{field}: must be a positive number of seconds"):
        Timeouts(**{field: 0})
