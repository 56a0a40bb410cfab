"""The HTTP API in-process (FastAPI's TestClient): routes, 4xx naming the field, nothing stored on errors."""

from __future__ import annotations

import math

import pytest
from fastapi.testclient import TestClient

from agent.http.api import create_app
from agent.hub.sidecar import Sidecar
from policies.registry import make
from sidecar_fakes import T0, Clock, open_store, step
from storage import StatsQuery

TOKEN = "s3cret-token-for-tests"


def body(*records) -> dict:
    return {"records": [r.to_dict() for r in records]}


@pytest.fixture
def client(sidecar):
    return TestClient(create_app(sidecar))


def stored_steps(sidecar) -> int:
    sidecar.flush(math.inf)
    return sum(r["steps"] for r in sidecar.store.stats(StatsQuery(by=("domain",))).rows)


def test_posted_steps_are_accepted_and_counted(client, sidecar):
    r = client.post("/v1/steps", json=body(step("code", 4, 2, T0), step("code", 0, 0, T0 + 1)))
    assert r.status_code == 202 and r.json() == {"accepted": 2}
    assert stored_steps(sidecar) == 2


@pytest.mark.parametrize("change, message", [
    ({"lookahead": "4"}, "record 1: lookahead: Input should be a valid integer"),
    ({"lookahead": True}, "record 1: lookahead: Input should be a valid integer"),
    ({"accepted": 5}, "record 1: accepted: must be 0..4, got 5"),
    ({"accepted_mask": [1, 0, 1, 0]}, "record 1: accepted_mask: must be `accepted` ones followed by zeros"),
    ({"accepted_mask": [1, 1, "x", 0]}, "record 1: accepted_mask[2]: Input should be a valid integer"),
    ({"draft_seconds": -0.1}, "record 1: draft_seconds: must be a finite non-negative number"),
    ({"domain": ""}, "record 1: domain: must be a non-empty string"),
    ({"colour": "red"}, "record 1: colour: unknown field"),
    ({"emitted": None}, "record 1: emitted: Input should be a valid integer"),
])
def test_an_invalid_record_gets_422_naming_index_and_field_and_nothing_is_stored(client, sidecar, change, message):
    bad = step("code", 4, 2, T0 + 1).to_dict()
    bad.update(change)
    r = client.post("/v1/steps", json={"records": [step("code", 4, 2, T0).to_dict(), bad]})
    assert r.status_code == 422
    assert r.json()["message"].startswith(message)
    assert r.json()["detail"][0]["loc"][:3] == ["body", "records", 1]
    assert stored_steps(sidecar) == 0


def test_a_missing_field_and_a_broken_body_are_named(client, sidecar):
    record = step("code", 4, 2, T0).to_dict()
    del record["emitted"]
    r = client.post("/v1/steps", json={"records": [record]})
    assert (r.status_code, r.json()["message"]) == (422, "record 0: emitted: required field is missing")
    r = client.post("/v1/steps", content=b'{"records": [', headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["message"].startswith("body: invalid JSON at character")
    r = client.post("/v1/steps", json=[record])
    assert r.status_code == 422 and r.json()["message"].startswith("body: ")
    r = client.post("/v1/steps", json={"steps": []})
    assert r.status_code == 422 and "records: required field is missing" in r.json()["message"]
    assert stored_steps(sidecar) == 0


def test_decision_route(client):
    r = client.get("/v1/decision", params={"domain": "code"})
    assert r.status_code == 200
    d = r.json()
    assert set(d) == {"domain", "lookahead", "speculate", "policy", "reason"}
    assert d["domain"] == "code" and d["policy"] == "heuristic+switch" and d["speculate"] == (d["lookahead"] > 0)
    r = client.get("/v1/decision")
    assert (r.status_code, r.json()["message"]) == (422, "domain: required field is missing")
    r = client.get("/v1/decision", params={"domain": "x" * 65})
    assert r.status_code == 422 and r.json()["message"].startswith("domain: String should have at most 64")
    r = client.get("/v1/decision", params={"domain": "a\tb"})
    assert (r.status_code, r.json()["message"]) == (422, "domain: must be printable text")


def test_alerts_route_reads_the_store_without_an_alert_manager(client, sidecar):
    from storage import StoredAlert

    sidecar.store.save_alert(StoredAlert({"alertname": "StaleDraft", "domain": "code", "severity": "critical",
                                          "pod": "local"}, {"summary": "stale"}, T0))
    r = client.get("/v1/alerts")
    assert r.status_code == 200
    (alert,) = r.json()["alerts"]
    assert alert["labels"]["alertname"] == "StaleDraft" and alert["state"] == "firing"
    assert client.get("/v1/alerts", params={"state": "resolved"}).json()["alerts"] == []
    r = client.get("/v1/alerts", params={"state": "open"})
    assert r.status_code == 422 and r.json()["message"].startswith("state: Input should be 'firing'")


def test_metrics_health_and_readiness(client, sidecar):
    client.post("/v1/steps", json=body(step("code", 4, 2, T0)))
    r = client.get("/metrics")
    assert r.status_code == 200 and 'specwatch_steps_total{domain="code"} 1.0' in r.text
    assert client.get("/healthz").json() == {"status": "ok"}
    r = client.get("/readyz")
    assert r.status_code == 200 and r.json()["checks"] == {"database": "ok", "ingest": "not configured",
                                                           "ring": "not configured", "models": "not configured"}
    sidecar.upkeep.flush_error = "StoreError: database error: disk I/O error"
    r = client.get("/readyz")
    assert r.status_code == 503 and r.json()["checks"]["database"].startswith("last flush failed")


def test_readiness_follows_the_ingest_worker(tmp_path):
    clock = Clock(T0 + 100)
    sidecar = Sidecar(open_store(tmp_path, clock), make("heuristic", seed=0), clock=clock, background=True)
    client = TestClient(create_app(sidecar))
    assert client.post("/v1/steps", json=body(step("code", 4, 2, T0))).status_code == 202
    r = client.get("/readyz")
    assert r.status_code == 200 and r.json()["checks"]["ingest"] == "ok"
    assert stored_steps(sidecar) == 1  # the flush waits for the worker
    sidecar.ingest.close()
    r = client.get("/readyz")
    assert r.status_code == 503 and r.json()["checks"]["ingest"] == "worker stopped"
    sidecar.store.db.dispose()


def test_readiness_waits_for_configured_models_and_generate_says_why(sidecar):
    client = TestClient(create_app(sidecar, models_configured=True))
    r = client.get("/readyz")
    assert r.status_code == 503 and r.json()["checks"]["models"] == "loading"
    r = client.post("/v1/generate", json={"prompt": "hello"})
    assert r.status_code == 503 and "no models configured" in r.json()["message"]
    r = client.post("/v1/generate", json={"prompt": "hello", "max_tokens": 5000})
    assert (r.status_code, r.json()["message"]) == (422, "max_tokens: must be at most 1024")
    r = client.post("/v1/generate", json={"prompt": "", "top_p": 0})
    assert r.status_code == 422 and r.json()["message"].startswith("prompt: String should have at least 1")


def test_a_token_protects_the_post_routes_only(sidecar):
    client = TestClient(create_app(sidecar, token=TOKEN))
    payload = body(step("code", 4, 2, T0))
    assert client.post("/v1/steps", json=payload).status_code == 401
    r = client.post("/v1/steps", json=payload, headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert client.post("/v1/generate", json={"prompt": "x"}).status_code == 401
    assert stored_steps(sidecar) == 0
    assert client.get("/v1/decision", params={"domain": "code"}).status_code == 200
    r = client.post("/v1/steps", json=payload, headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 202 and stored_steps(sidecar) == 1


def test_a_body_over_the_limit_gets_413_and_nothing_is_stored(sidecar):
    client = TestClient(create_app(sidecar, body_limit=4096))
    big = body(*[step("code", 4, 2, T0 + i) for i in range(40)])
    r = client.post("/v1/steps", json=big)
    assert r.status_code == 413
    assert client.post("/v1/steps", json=body(step("code", 4, 2, T0))).status_code == 202
    assert stored_steps(sidecar) == 1


def test_openapi_publishes_the_routes_and_the_record_schema(client):
    spec = client.get("/openapi.json").json()
    for path in ("/v1/steps", "/v1/decision", "/v1/generate", "/v1/alerts", "/metrics", "/healthz", "/readyz"):
        assert path in spec["paths"]
    record = spec["components"]["schemas"]["StepRecordIn"]
    assert set(record["required"]) == {"domain", "lookahead", "accepted", "emitted", "draft_seconds",
                                       "verify_seconds", "target_version", "draft_version"}
    assert client.get("/docs").status_code == 200
