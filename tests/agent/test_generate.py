"""POST /v1/generate: the in-process decoder, steered by the sidecar, every step recorded."""

from __future__ import annotations

import math
import time

import pytest
from fastapi.testclient import TestClient

from agent.http.api import create_app
from agent.hub.sidecar import Sidecar
from agent.runtime import generator
from agent.runtime.config import SidecarConfig
from policies.registry import make
from sidecar_fakes import open_store
from storage import StatsQuery
from served import tiny_model_dirs


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    return tiny_model_dirs(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def models(model_dirs):
    target, draft = model_dirs
    return generator.load(SidecarConfig(target_dir=str(target), draft_dir=str(draft), device="cpu"))


def client_for(tmp_path, models, policy: str):
    tmp_path.mkdir(parents=True, exist_ok=True)
    store = open_store(tmp_path, time.time)
    sidecar = Sidecar(store, make(policy, kmax=4, seed=0))
    gen = generator.Generator(sidecar, models)
    return TestClient(create_app(sidecar, generator=gen, models_configured=True)), sidecar


def test_generate_runs_the_sidecars_lookahead_and_records_every_step(tmp_path, models):
    client, sidecar = client_for(tmp_path, models, "fixed:3")
    r = client.post("/v1/generate", json={"prompt": "def main():", "domain": "code", "max_tokens": 40})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["tokens"] == 40 and isinstance(out["text"], str)
    assert set(out["lookaheads"]) <= {"0", "1", "2", "3"} and out["lookaheads"]["3"] >= 5
    assert out["drafted"] == sum(int(k) * n for k, n in out["lookaheads"].items())
    assert out["acceptance_rate"] == pytest.approx(out["accepted"] / out["drafted"])
    assert out["target_version"] == models.target_version
    sidecar.flush(math.inf)
    (row,) = sidecar.store.stats(StatsQuery(by=("domain",))).rows
    assert (row["domain"], row["steps"], row["accepted"]) == ("code", out["steps"], out["accepted"])
    assert client.get("/readyz").json()["checks"]["models"] == "ok"
    sidecar.store.db.dispose()


def test_greedy_generation_is_the_same_whatever_the_lookahead(tmp_path, models):
    outs = {}
    for policy in ("fixed:0", "fixed:4", "heuristic+switch"):
        client, sidecar = client_for(tmp_path / policy.replace(":", ""), models, policy)
        outs[policy] = client.post("/v1/generate", json={"prompt": "hello", "max_tokens": 24}).json()
        sidecar.store.db.dispose()
    assert outs["fixed:0"]["text"] == outs["fixed:4"]["text"] == outs["heuristic+switch"]["text"]
    assert (outs["fixed:0"]["steps"], outs["fixed:0"]["drafted"]) == (24, 0)
    assert outs["fixed:4"]["accepted"] > 0 and outs["fixed:4"]["steps"] < 24


def test_bad_generation_arguments_are_named(tmp_path, models):
    client, sidecar = client_for(tmp_path, models, "fixed:2")
    r = client.post("/v1/generate", json={"prompt": "x" * 250, "max_tokens": 100})
    assert r.status_code == 422 and r.json()["message"].startswith("max_tokens: prompt (250) + 100 exceeds")
    r = client.post("/v1/generate", json={"prompt": "x", "temperature": -1})
    assert r.status_code == 422 and r.json()["message"].startswith("temperature: Input should be greater")
    sidecar.flush(math.inf)
    assert sidecar.store.stats(StatsQuery(by=("domain",))).rows == []
    sidecar.store.db.dispose()


def test_start_up_checks_name_the_missing_model(tmp_path):
    with pytest.raises(generator.ModelsUnavailable, match="target_dir: .* is not a model folder"):
        generator.check(SidecarConfig(target_dir=str(tmp_path), draft_dir=str(tmp_path)))


def test_generated_prompts_are_sampled_for_the_guard(tmp_path, models):
    # sample_prompts keeps POST /v1/generate's prompts; GET /v1/sample gives them as the JSON lines
    # `specwatch guard --prompts` reads, behind the token; without sampling it says how to turn it on.
    from agent.guard.sample import load_sample
    from agent.runtime.prompt_sampler import PromptSampler, SamplerConfig

    store = open_store(tmp_path, time.time)
    sidecar = Sidecar(store, make("fixed:2", kmax=4, seed=0))
    gen = generator.Generator(sidecar, models)
    token = "t" * 24
    client = TestClient(create_app(sidecar, generator=gen, models_configured=True, token=token,
                                   sampler=PromptSampler(SamplerConfig(cap=4), seed=0)))
    for domain, prompt in (("code", "def main():"), ("prose", "Once upon"), ("code", "import os")):
        assert client.post("/v1/generate", json={"prompt": prompt, "domain": domain, "max_tokens": 4},
                           headers={"Authorization": f"Bearer {token}"}).status_code == 200
    assert client.get("/v1/sample").status_code == 401
    answer = client.get("/v1/sample", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/x-ndjson")
    path = tmp_path / "sample.jsonl"
    path.write_text(answer.text)
    assert load_sample(path, lambda text: list(text.encode())) == {
        "code": [list(b"def main():"), list(b"import os")], "prose": [list(b"Once upon")]}
    off = TestClient(create_app(sidecar, generator=gen, models_configured=True))
    assert off.get("/v1/sample").status_code == 404 and "sample_prompts" in off.get("/v1/sample").json()["message"]
    store.db.dispose()
