"""Acked records through a real `specwatch serve`: in the database within about a second, and visible to
`specwatch stats` (no --until) right after SIGTERM or kill -9."""

from __future__ import annotations

import signal
import sqlite3
import time

import pytest

from served import Served, random_records

FLUSHED_WITHIN = 30.0  # generous on a busy machine: the contract is ~1 s, this only bounds the wait


def stored_steps(db_path) -> int:
    with sqlite3.connect(db_path) as conn:
        return conn.execute("SELECT COALESCE(SUM(steps), 0) FROM windows").fetchone()[0]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_stats_shows_every_record_right_after_the_process_stops(tmp_path, sig):
    # Posted at once after the start: counted in the first window after it, a few seconds ahead of the
    # clock. Before: stats up to "now" printed [] although the rows were stored.
    records = random_records(400, seed=3)
    for r in records:
        r.pop("timestamp", None)
    with Served(tmp_path) as s:
        assert s.client.post("/v1/steps", json={"records": records}).status_code == 202
        if sig == signal.SIGKILL:
            deadline = time.monotonic() + FLUSHED_WITHIN
            while stored_steps(tmp_path / "served.db") < len(records) and time.monotonic() < deadline:
                time.sleep(0.2)
        s.stop(sig)
        rows = s.cli("stats")
    assert sum(r["steps"] for r in rows) == len(records)


def test_records_ahead_of_the_clock_reach_the_database_before_their_window_ends(tmp_path):
    # Stamped 200 s ahead (inside the 5 min skew): their window stays open for minutes. Before, only closed
    # windows were written, so kill -9 lost them all.
    records = random_records(300, seed=4, now=time.time() + 200)
    with Served(tmp_path) as s:
        assert s.client.post("/v1/steps", json={"records": records}).status_code == 202
        deadline = time.monotonic() + FLUSHED_WITHIN
        while stored_steps(tmp_path / "served.db") < len(records) and time.monotonic() < deadline:
            time.sleep(0.2)
        s.stop(signal.SIGKILL)
        rows = s.cli("stats")
    assert sum(r["steps"] for r in rows) == len(records)
