"""Reads that scan many rows (stats) run without PostgreSQL's JIT; other reads keep the server's setting."""

import pytest

from storage.engine import Database


def test_a_scan_turns_jit_off_for_its_own_transaction_only(db_url):
    if not db_url.startswith("postgresql"):
        pytest.skip("JIT: PostgreSQL only")
    db = Database.open(db_url)
    try:
        with db.read() as conn:
            default = conn.exec_driver_sql("SHOW jit").scalar()
        with db.read(scan=True) as conn:
            assert conn.exec_driver_sql("SHOW jit").scalar() == "off"
        with db.read() as conn:  # the pooled connection is back to the server's setting
            assert conn.exec_driver_sql("SHOW jit").scalar() == default
    finally:
        db.dispose()
