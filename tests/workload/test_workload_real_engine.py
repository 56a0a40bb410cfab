"""A short replay through a real llama-server serving the real model (SmolLM2-135M-Instruct as its package
ships it): every domain's prompts are accepted in the chat format, two requests are decoded at once, and the
tokens the driver counts are the tokens the server says it predicted. Skipped, with the reason, without
llama-server (`make engine`) or without the model's package (`make real`)."""

from __future__ import annotations

import re

import httpx
import pytest

from agent.engines.llamacpp import LlamaServer, LlamaServerConfig, LlamaServerError, find_binary
from agent.workload import tally
from agent.workload.mix import schedule
from agent.workload.replay import ReplayConfig, replay
from agent.workload.requests import Sampling

try:
    find_binary()
except LlamaServerError as exc:
    pytest.skip(f"llama-server not installed ({exc})", allow_module_level=True)

EVERY = "code=1,edit=1,extract=1,chat=1,json=1,copy=1"


def _predicted(base_url: str) -> float:
    page = httpx.get(base_url + "/metrics", timeout=30).raise_for_status().text
    return float(re.search(r"^llamacpp:tokens_predicted_total (\S+)$", page, re.M).group(1))


def test_a_replay_through_a_real_llama_server(real_model, tmp_path):
    config = LlamaServerConfig(model=real_model.target_gguf, ctx_size=2048, parallel=2, threads=1, metrics=True)
    with LlamaServer(config, log_path=tmp_path / "server.log").start() as server:
        before = _predicted(server.base_url)
        run = replay(ReplayConfig(server.base_url, schedule(EVERY), concurrency=2, requests=8, seed=3,
                                  sampling=Sampling(max_tokens=12), timeout=300))
        predicted = _predicted(server.base_url) - before
    assert [r.error for r in run.results] == [None] * 8
    assert all(1 <= r.tokens <= 12 and r.prompt_tokens > 20 for r in run.results)
    assert run.max_in_flight == 2
    total = tally.summary(run)[-1]
    assert total["requests"] == 8 and total["tokens"] == sum(r.tokens for r in run.results) == predicted
