"""The cached readiness probe: a database that never answers makes /readyz say so within ``wait``
seconds, with one probe thread however often it is asked; an answer comes back as soon as it returns."""

from __future__ import annotations

import asyncio
import threading
from contextlib import contextmanager
from types import SimpleNamespace

from agent.http.readiness import Readiness


class HangingDb:
    def __init__(self):
        self.release, self.entered = threading.Event(), 0

    @contextmanager
    def write(self):
        self.entered += 1
        self.release.wait(30)
        yield


def test_a_hung_database_is_reported_stale_within_the_wait_and_probed_once():
    db = HangingDb()
    sidecar = SimpleNamespace(flush_error=None, ingest=None, store=SimpleNamespace(db=db))
    readiness = Readiness(sidecar, interval=0.0, wait=0.2)
    try:
        for _ in range(3):
            ok, checks = asyncio.run(readiness.report())
            assert not ok and checks["database"].startswith("stale: no answer from the database for ")
        assert db.entered == 1  # later calls found the probe still running and started none
    finally:
        db.release.set()
    for _ in range(100):
        ok, checks = asyncio.run(readiness.report())
        if ok:
            break
    assert ok and checks["database"] == "ok"
