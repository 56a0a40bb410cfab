"""POST /v1/steps with aggregate records, and the old record shape unchanged."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from agent.http.api import create_app
from test_api import client, stored_steps  # noqa: F401 (client is a fixture; sidecar comes from conftest.py)
from sidecar_fakes import T0

OLD = {"domain": "code", "lookahead": 4, "accepted": 2, "emitted": 3, "draft_seconds": 0.004,
       "verify_seconds": 0.011, "target_version": "t1", "draft_version": "d1", "accepted_mask": [1, 1, 0, 0],
       "timestamp": T0}
AGG = {"domain": "code", "lookahead": 4, "steps": 10, "drafted": 38, "accepted": 25, "emitted": 33,
       "draft_seconds": 0.0, "verify_seconds": 0.0, "seconds": 0.25, "target_version": "t1",
       "draft_version": "d1", "pool": "k4", "timestamp": T0 + 1}


def test_an_old_client_record_is_accepted_unchanged(client, sidecar):
    r = client.post("/v1/steps", json={"records": [OLD]})
    assert r.status_code == 202 and r.json() == {"accepted": 1}
    assert stored_steps(sidecar) == 1


@pytest.mark.parametrize("change, message", [
    ({"steps": 0}, "record 1: steps: must be 1..10000000, got 0"),
    ({"steps": "10"}, "record 1: steps: Input should be a valid integer"),
    ({"drafted": 41}, "record 1: drafted: must be 0..40, got 41"),
    ({"emitted": 36}, "record 1: emitted: must be 10..35, got 36"),
    ({"seconds": 0.1, "verify_seconds": 0.2}, "record 1: seconds: must be >= draft_seconds + verify_seconds"),
    ({"pool": "x" * 65}, "record 1: pool: longer than 64 characters"),
    ({"accepted_mask": [1, 1, 0, 0]}, "record 1: accepted_mask: must be absent from an aggregate"),
])
def test_a_bad_aggregate_gets_422_naming_index_and_field_and_nothing_is_stored(client, sidecar, change, message):
    r = client.post("/v1/steps", json={"records": [OLD, {**AGG, **change}]})
    assert r.status_code == 422
    assert r.json()["message"].startswith(message)
    assert stored_steps(sidecar) == 0


def test_the_published_schema_describes_the_aggregate_fields(sidecar):  # noqa: F811
    schema = TestClient(create_app(sidecar)).get("/openapi.json").json()["components"]["schemas"]["StepRecordIn"]
    for name in ("steps", "drafted", "seconds", "pool"):
        assert schema["properties"][name]["description"], name
    assert "steps" not in schema.get("required", [])


def test_an_aggregate_is_stored_as_its_steps(client, sidecar):
    r = client.post("/v1/steps", json={"records": [OLD, AGG]})
    assert r.status_code == 202 and r.json() == {"accepted": 2}
    assert stored_steps(sidecar) == 11
