"""What the API refuses instead of waiting: ingest when the store or the ingest queue is full (503 +
Retry-After, counted, nothing kept, the request never blocks) and /v1/generate beyond its cap and queue
(429 + Retry-After), with /v1/steps and /readyz answering while generate and the shared threadpool are
saturated (a real uvicorn server on a loopback port)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient

from agent.http.api import create_app
from agent.runtime.options import Limits
from agent.hub.ingest import Ingest
from served import free_port
from api_helpers import stored_steps
from sidecar_fakes import T0, step
from storage import Store

BATCH = {"records": [step("code", 4, 2, T0).to_dict()]}


def test_over_the_unwritten_cap_ingest_gets_503_with_retry_after_and_keeps_nothing(sidecar, monkeypatch):
    unwritten = {"rows": 0}
    monkeypatch.setattr(Store, "unwritten", property(lambda _: unwritten["rows"]), raising=False)
    client = TestClient(create_app(sidecar, limits=Limits(max_unwritten=100)))
    assert client.post("/v1/steps", json=BATCH).status_code == 202
    unwritten["rows"] = 100
    r = client.post("/v1/steps", json=BATCH)
    assert r.status_code == 503 and r.headers["Retry-After"] == "1"
    assert r.json()["message"].startswith("the store holds 100 unwritten window rows (at most 100)")
    assert 'specwatch_ingest_refused_total{reason="unwritten_cap"} 1.0' in client.get("/metrics").text
    unwritten["rows"] = 99
    assert client.post("/v1/steps", json=BATCH).status_code == 202
    assert stored_steps(sidecar) == 2


def test_a_full_ingest_queue_refuses_instead_of_blocking_the_request(sidecar):
    release = threading.Event()
    sidecar.ingest = Ingest(lambda batch: release.wait(), max_pending=2)
    safety = threading.Timer(30, release.set)  # a blocking put would hang the test without it
    safety.start()
    try:
        client = TestClient(create_app(sidecar))
        answers = [client.post("/v1/steps", json=BATCH).status_code for _ in range(6)]
        assert not release.is_set(), "a request blocked until the safety timer released the worker"
        refused = answers.count(503)
        # the worker holds one batch (the one or two items it took at once), two more wait: the rest refused
        assert answers[:2] == [202, 202] and answers.count(202) <= 4 and refused == 6 - answers.count(202)
        text = client.get("/metrics").text
        assert f'specwatch_ingest_refused_total{{reason="queue_full"}} {float(refused)}' in text
    finally:
        release.set()
        safety.cancel()
        sidecar.ingest.close()


class SlowGenerator:
    """Stands in for the decoder: each generate holds a thread until ``release`` is set."""

    ready, error = True, None

    def __init__(self):
        self.release, self.running, self.peak = threading.Event(), 0, 0
        self._lock = threading.Lock()

    def generate(self, prompt, domain, max_tokens, **_):
        with self._lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        self.release.wait(30)
        with self._lock:
            self.running -= 1
        return dict(text="x", domain=domain, tokens=1, steps=1, drafted=0, accepted=0, acceptance_rate=None,
                    tokens_per_step=1.0, lookaheads={"0": 1}, seconds=0.1, tokens_per_second=10.0,
                    target_version="t", draft_version="d")


class Serving:
    def __init__(self, app):
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), lifespan="off",
                                                    log_level="warning"))
        self.url = f"http://127.0.0.1:{self.server.config.port}"

    def __enter__(self):
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.02)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(10)


def test_generate_is_capped_and_steps_answer_while_it_and_the_threadpool_are_saturated(sidecar):
    gen = SlowGenerator()
    app = create_app(sidecar, generator=gen, models_configured=True,
                     limits=Limits(generate_concurrency=2, generate_queue=3))
    hold = threading.Event()

    @app.get("/hold")  # a sync route: occupies one thread of the shared pool (40) until released
    def hold_thread() -> dict:
        hold.wait(30)
        return {}

    with Serving(app) as s, ThreadPoolExecutor(120) as pool:
        try:
            def post(path, **kw):
                with httpx.Client(base_url=s.url, timeout=40) as c:
                    return c.post(path, **kw) if path != "/hold" else c.get(path)

            holds = [pool.submit(post, "/hold") for _ in range(45)]
            generates = [pool.submit(post, "/v1/generate", json={"prompt": "hi"}) for _ in range(60)]
            deadline = time.monotonic() + 30  # until every request beyond cap + queue has been answered
            while sum(f.done() for f in generates) < 55 and time.monotonic() < deadline:
                time.sleep(0.05)
            refused = [f.result() for f in generates if f.done()]
            with httpx.Client(base_url=s.url, timeout=10) as c:  # answered at all while saturated
                assert c.post("/v1/steps", json=BATCH).status_code == 202
                assert c.get("/readyz").status_code == 200
                assert c.get("/healthz").status_code == 200
            assert len(refused) == 55 and {r.status_code for r in refused} == {429}
            assert refused[0].headers["Retry-After"] == "1"
            assert refused[0].json()["message"].startswith("5 generate requests running or queued (at most 2 + 3)")
            assert gen.running == 2
        finally:
            gen.release.set()
            hold.set()
        served = [f.result() for f in generates if f.result().status_code == 200]
        assert len(served) == 5 and gen.peak == 2
        assert all(f.result().status_code == 200 for f in holds)
    assert 'specwatch_generate_refused_total 55.0' in TestClient(app).get("/metrics").text
