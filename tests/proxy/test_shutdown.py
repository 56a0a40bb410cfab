"""`specwatch proxy` as a process, at its edges in time: SIGTERM lets the streams in flight finish (and says
which it had to cut), the database is no start-up dependency, and a database that does not answer at shutdown
costs no record: what it has not taken goes to the dead-letter file, and `specwatch db replay` adds it back."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import httpx
from typer.testing import CliRunner

from agent.cli import _register, app
from storage import StatsQuery, Store
from tests.proxy.fake_engine import FakeEngine
from tests.proxy.servers import Running, free_port

CLI = [sys.executable, "-c", "from agent.cli import main; main()"]


class ProxyProcess:
    def __init__(self, upstream: str, db: str, tmp_path, *args: str):
        self.port, self.log = free_port(), tmp_path / "proxy.log"
        self.url = f"http://127.0.0.1:{self.port}"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([*CLI, "proxy", "--upstream", f"off={upstream}", "--db", db, "--port",
                                          str(self.port), "--admin-port", str(free_port()), *args],
                                         env={**os.environ, "SPECWATCH_POD": "edge", "SPECWATCH_HOME": str(tmp_path)},
                                         stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(self.url + "/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert self.proc.poll() is None and time.monotonic() < deadline, self.output()
            time.sleep(0.1)

    def stop(self, timeout: float = 60) -> tuple[int, float]:
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout), time.monotonic() - started
        finally:
            if self.proc.poll() is None:
                self.proc.kill()

    def output(self) -> str:
        return self.log.read_text()


def complete(url: str, stream: bool = False, tokens: int = 4, outcomes: list | None = None) -> bytes:
    body = {"prompt": "p", "max_tokens": tokens, "stream": stream}
    try:
        with httpx.stream("POST", url + "/v1/completions", json=body, headers={"X-Specwatch-Domain": "code"},
                          timeout=60) as answer:
            text = b"".join(answer.iter_raw())
    except httpx.HTTPError as exc:
        text = type(exc).__name__.encode()
    if outcomes is not None:
        outcomes.append(text)
    return text


def streams(url: str, n: int, tokens: int) -> tuple[list[threading.Thread], list[bytes]]:
    outcomes: list[bytes] = []
    threads = [threading.Thread(target=complete, args=(url, True, tokens, outcomes)) for _ in range(n)]
    for t in threads:
        t.start()
    return threads, outcomes


def stored_steps(db: str) -> int:
    with Store.open(db) as store:
        return sum(r["steps"] for r in store.stats(StatsQuery(until=time.time() + 60, by=("domain",))).rows)


def dead_letter_steps(path) -> int:
    return sum(json.loads(line)["steps"] for line in path.read_text().splitlines()) if path.exists() else 0


def test_sigterm_lets_the_streams_in_flight_finish_and_stores_them(tmp_path):
    engine = FakeEngine()
    engine.chunk_delay = 0.1  # 20 tokens: 2 s a stream
    db = f"sqlite:///{tmp_path / 'p.db'}"
    with Running(engine.app) as up:
        proxy = ProxyProcess(up.url, db, tmp_path)
        threads, outcomes = streams(proxy.url, 4, 20)
        time.sleep(0.8)
        code, seconds = proxy.stop()
        for t in threads:
            t.join(30)
    assert code == 0, proxy.output()
    assert len(outcomes) == 4 and all(o.endswith(b"data: [DONE]\n\n") for o in outcomes)
    assert stored_steps(db) == 4 * 20
    log = proxy.output()
    assert "draining: 4 request(s) in flight get up to 30 s" in log
    assert "drain: 4 request(s) in flight at the signal, every one finished" in log
    assert "shut down cleanly" in log and "every record flushed" in log


def test_a_drain_shorter_than_the_streams_cuts_them_and_says_so(tmp_path):
    engine = FakeEngine()
    engine.chunk_delay = 0.2  # 50 tokens: 10 s a stream
    db = f"sqlite:///{tmp_path / 'p.db'}"
    with Running(engine.app) as up:
        proxy = ProxyProcess(up.url, db, tmp_path, "--drain-seconds", "1")
        complete(proxy.url)  # one short request completes first: its record must be kept
        threads, outcomes = streams(proxy.url, 3, 50)
        time.sleep(0.8)
        code, seconds = proxy.stop()
        for t in threads:
            t.join(30)
    assert code == 0 and seconds < 8
    assert len(outcomes) == 3 and not any(o.endswith(b"data: [DONE]\n\n") for o in outcomes)
    log = proxy.output()
    assert "drain: 3 request(s) in flight at the signal; 3 cut after drain_seconds=1" in log, log
    assert stored_steps(db) == 4  # the completed request; the cut ones gave no timings


def test_the_database_unreachable_at_start_stops_nothing_and_loses_nothing(tmp_path):
    db = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/test"  # a closed port
    engine = FakeEngine()
    with Running(engine.app) as up:
        started = time.monotonic()
        proxy = ProxyProcess(up.url, db, tmp_path)
        answers = [complete(proxy.url) for _ in range(5)]
        assert all(b'"timings"' in a for a in answers)
        time.sleep(1.5)  # flushes fail meanwhile: counted
        admin = next(a for a in proxy.proc.args if a.isdigit() and int(a) != proxy.port)
        metrics = httpx.get(f"http://127.0.0.1:{admin}/metrics").text
        code, seconds = proxy.stop()
    assert time.monotonic() - started < 100
    assert "specwatch_store_flush_failures_total 0.0" not in metrics and "specwatch_store_unwritten_rows 1.0" in metrics
    assert code == 0, proxy.output()
    assert dead_letter_steps(tmp_path / "dead-letter.jsonl") == 5 * 4  # every record, none lost
    assert "dead-lettered to" in proxy.output()


def test_a_database_that_hangs_at_shutdown_costs_no_record(tmp_path):
    path = tmp_path / "p.db"
    db = f"sqlite:///{path}"
    engine = FakeEngine()
    with Running(engine.app) as up:
        proxy = ProxyProcess(up.url, db, tmp_path, "--shutdown-seconds", "2")
        complete(proxy.url)
        deadline = time.monotonic() + 30
        while stored_steps(db) < 4 and time.monotonic() < deadline:  # flushed (about 1 s; longer on a busy machine)
            time.sleep(0.2)
        locker = sqlite3.connect(path, isolation_level=None)
        locker.execute("BEGIN IMMEDIATE")  # another writer holds the lock: a flush waits 30 s for it
        try:
            for _ in range(3):
                complete(proxy.url)
            code, seconds = proxy.stop()
        finally:
            locker.execute("ROLLBACK")
            locker.close()
    assert code == 0 and seconds < 10, proxy.output()  # not the statement timeout, not the watchdog
    spilled = dead_letter_steps(tmp_path / "p.db.dead-letter.jsonl")
    assert spilled == 4 * 4  # the window's whole total: the record flushed before and the three after
    assert stored_steps(db) == 4
    assert "the final flush did not finish" in proxy.output()
    # Once the database answers again, the operator adds the rows back; a second replay stores nothing twice.
    _register()
    for written in (1, 0):
        out = CliRunner().invoke(app, ["db", "replay", str(tmp_path / "p.db.dead-letter.jsonl"), "--db", db])
        assert out.exit_code == 0 and out.output.startswith(f"{written} window rows written"), out.output
    assert stored_steps(db) == 4 * 4
