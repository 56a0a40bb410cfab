"""Reads that scan many rows (stats) run without PostgreSQL's JIT and with random_page_cost 1.1; other reads
keep the server's settings."""

import pytest

from storage.engine import Database


def test_a_scan_turns_jit_off_for_its_own_transaction_only(db_url):
    if not db_url.startswith("postgresql"):
        pytest.skip("JIT: PostgreSQL only")
    db = Database.open(db_url)
    try:
        def settings(conn) -> tuple[str, str]:
            return tuple(conn.exec_driver_sql(f"SHOW {name}").scalar() for name in ("jit", "random_page_cost"))

        with db.read() as conn:
            default = settings(conn)
        assert default[1] != "1.1"  # the server's own (4 unless tuned)
        with db.read(scan=True) as conn:
            assert settings(conn) == ("off", "1.1")
        with db.read() as conn:  # the pooled connection is back to the server's settings
            assert settings(conn) == default
    finally:
        db.dispose()
