"""Hostile input at the HTTP edge: duplicate JSON keys and non-finite numbers refused naming where they
are; ``auth = all`` puts every route but the probes behind the token."""

from __future__ import annotations


import pytest
from fastapi.testclient import TestClient

from agent.http.api import create_app
from agent.runtime.config import ConfigError, SidecarConfig
from api_helpers import stored_steps
from sidecar_fakes import T0, step

TOKEN = "s3cret-token-for-tests"


GOOD = step("code", 4, 2, T0).to_dict()


def raw(record_text: str) -> str:
    import json

    return '{"records": [' + json.dumps(GOOD) + ", " + record_text + "]}"


@pytest.mark.parametrize("text, message", [
    ('{"domain": "code", "domain": "chat"}', "record 1: domain: duplicate key in a JSON object"),
    ('{"draft_seconds": NaN}', "record 1: draft_seconds: must be a finite number, got NaN"),
    ('{"verify_seconds": Infinity}', "record 1: verify_seconds: must be a finite number, got Infinity"),
    ('{"draft_seconds": -Infinity}', "record 1: draft_seconds: must be a finite number, got -Infinity"),
    ('{"timestamp": 1e400}', "record 1: timestamp: must be a finite number, got 1e400"),
    ('{"expected_acceptance": [0.5, 1e999]}', "record 1: expected_acceptance[1]: must be a finite number, got 1e999"),
])
def test_duplicate_keys_and_non_finite_numbers_get_422_naming_the_place(sidecar, text, message):
    client = TestClient(create_app(sidecar))
    r = client.post("/v1/steps", content=raw(text), headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["message"] == message
    assert stored_steps(sidecar) == 0


def test_a_duplicate_key_at_the_top_level_is_named(sidecar):
    client = TestClient(create_app(sidecar))
    r = client.post("/v1/steps", content='{"records": [], "records": []}', headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["message"] == "records: duplicate key in a JSON object"


def test_ordinary_json_still_passes(sidecar):
    client = TestClient(create_app(sidecar))
    assert client.post("/v1/steps", content=raw(__import__("json").dumps(GOOD)),
                       headers={"Content-Type": "application/json"}).status_code == 202
    assert stored_steps(sidecar) == 2


ROUTES = [("get", "/v1/decision?domain=code"), ("get", "/v1/alerts"), ("get", "/metrics"),
          ("get", "/openapi.json"), ("get", "/docs"), ("post", "/v1/steps")]


@pytest.mark.parametrize("method, path", ROUTES)
def test_auth_all_needs_the_token_everywhere_but_the_probes(sidecar, method, path):
    client = TestClient(create_app(sidecar, token=TOKEN, auth="all"))
    kwargs = {"json": {"records": []}} if method == "post" else {}
    r = getattr(client, method)(path, **kwargs)
    assert r.status_code == 401 and r.headers["WWW-Authenticate"] == "Bearer"
    wrong = getattr(client, method)(path, headers={"Authorization": "Bearer wrong-token-xxxxxxxx"}, **kwargs)
    assert wrong.status_code == 401
    ok = getattr(client, method)(path, headers={"Authorization": f"Bearer {TOKEN}"}, **kwargs)
    assert ok.status_code in (200, 202), ok.text


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_probes_never_need_the_token(sidecar, path):
    assert TestClient(create_app(sidecar, token=TOKEN, auth="all")).get(path).status_code == 200


def test_auth_ingest_leaves_the_get_routes_open(sidecar):
    client = TestClient(create_app(sidecar, token=TOKEN))
    assert client.get("/v1/decision?domain=code").status_code == 200
    assert client.get("/openapi.json").status_code == 200
    assert client.post("/v1/steps", json={"records": []}).status_code == 401


def test_auth_all_without_a_token_is_a_config_error():
    with pytest.raises(ConfigError, match="auth: auth = all needs a token"):
        SidecarConfig(auth="all")
    with pytest.raises(ConfigError, match="auth: must be one of ingest, all, got 'some'"):
        SidecarConfig(auth="some", token=TOKEN)
    assert SidecarConfig(auth="all", token=TOKEN).auth == "all"
