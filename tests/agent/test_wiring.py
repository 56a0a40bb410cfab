"""One wiring function (agent/runtime/wiring.py) for serve, proxy and the in-process runtime: the configured
database timeouts reach the store, secrets are made unloggable, the store's and the flush job's counts are on
/metrics; without waiting for the database the sidecar starts and records at once; a close within a deadline
that the database does not answer hands every unwritten row to the dead-letter file, and says so."""

from __future__ import annotations

import json
import sqlite3
import time

from prometheus_client import generate_latest

from agent.hf.runtime import in_process
from agent.runtime.config import SidecarConfig
from agent.runtime.wiring import wire
from specwatch_core import redact
from history import step
from storage import StatsQuery, Store


def config(tmp_path, **options) -> SidecarConfig:
    return SidecarConfig(**{"db": f"sqlite:///{tmp_path / 'wired.db'}", "pod": "wired",
                            "policy": "heuristic+switch", **options})


def steps(db: str) -> int:
    with Store.open(db) as store:
        return sum(r["steps"] for r in store.stats(StatsQuery(by=("domain",), until=time.time() + 60)).rows)


def test_the_config_reaches_the_store_the_jobs_and_metrics(tmp_path):
    cfg = config(tmp_path, db_connect_seconds=1.5, db_statement_seconds=2.5, flush_seconds=0.5,
                 token="t" * 20, webhook_url="https://hooks.example/s3cr3t-path?key=abcdefgh")
    wired = wire(cfg)
    try:
        assert cfg.db_timeouts.connect == 1.5 and cfg.db_timeouts.statement == 2.5
        assert wired.jobs.intervals == cfg.intervals and wired.jobs.intervals.flush == 0.5
        assert wired.store.ready and wired.store.config.max_unwritten is None  # serve bounds at its API
        assert redact.redact("token tttttttttttttttttttt") == "token ***"
        text = generate_latest(wired.registry).decode()
        for name in ("specwatch_store_flush_failures_total", "specwatch_store_flush_timeouts_total",
                     "specwatch_store_flush_running_seconds", "specwatch_store_spilled_rows_total",
                     "specwatch_store_lost_rows_total"):
            assert name in text
    finally:
        wired.close()


def test_without_waiting_for_the_database_the_sidecar_records_at_once(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECWATCH_HOME", str(tmp_path))  # where the dead-letter file of a server database goes
    cfg = config(tmp_path, db="postgresql+psycopg://postgres@127.0.0.1:1/test", max_unwritten=1000)
    started = time.monotonic()
    wired = wire(cfg, wait_for_database=False)
    assert time.monotonic() - started < 5.0 and not wired.store.ready
    assert wired.store.config.max_unwritten == 1000
    wired.sidecar.record(step("code", ts=time.time()))
    assert wired.sidecar.decide("code").lookahead >= 0
    closed = wired.close(5.0)
    assert closed.spilled == 1 and closed.lost == 0 and not closed.clean
    assert "dead-lettered to" in closed.describe()
    assert [json.loads(line)["steps"] for line in (tmp_path / "dead-letter.jsonl").read_text().splitlines()] == [1]


def test_a_close_the_database_does_not_answer_spills_within_its_deadline(tmp_path):
    cfg = config(tmp_path, db_statement_seconds=30.0)  # SQLite: the wait for the write lock
    wired = wire(cfg).start()
    wired.sidecar.record(step("code", ts=time.time()))
    wired.sidecar.flush()
    assert steps(cfg.db) == 1
    locker = sqlite3.connect(tmp_path / "wired.db", isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")  # another writer holds the lock: every flush now waits 30 s
    try:
        for _ in range(3):
            wired.sidecar.record(step("code", ts=time.time()))
        started = time.monotonic()
        closed = wired.close(1.0)
        assert time.monotonic() - started < 5.0  # not the 30 s of the statement timeout
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    assert not closed.finished and closed.spilled == 1 and closed.lost == 0
    [row] = [json.loads(line) for line in (tmp_path / "wired.db.dead-letter.jsonl").read_text().splitlines()]
    assert (row["reason"], row["domain"], row["steps"]) == ("unwritten", "code", 4)  # the whole window's total
    assert "did not answer within 1 s" in row["error"] and "did not finish" in closed.describe()


def test_the_in_process_runtime_is_the_same_sidecar(tmp_path, monkeypatch):
    monkeypatch.delenv("SPECWATCH_CONFIG", raising=False)
    runtime = in_process(db=f"sqlite:///{tmp_path / 'hf.db'}", pod="hf", policy="heuristic+switch")
    try:
        assert runtime.jobs.scheduler.running and runtime.store.ready
        runtime.sidecar.record(step("code", ts=time.time()))
    finally:
        runtime.close()
    assert steps(f"sqlite:///{tmp_path / 'hf.db'}") == 1
