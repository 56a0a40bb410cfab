"""Per-load schedules (agent/advice/loads.py) from requests stored by the load they met, and `specwatch
recommend` printing them as vLLM's num_speculative_tokens_per_batch_size and TensorRT-LLM's
draft_len_schedule."""

from __future__ import annotations

import dataclasses
import json

from agent.advice.loads import MAX_BATCH, Schedule, engine_config, schedules, speeds
from history import T0, aggregate
from tests.agent.test_recommend import NOW, command, store  # noqa: F401 - the fixture

# tokens per step second per (domain, K, load): k8 wins alone; off wins for chat from 3 in flight, and for
# copy from 5 (copy's drafts are accepted more)
SPEED = {("chat", 0, 1): 44, ("chat", 8, 1): 55, ("chat", 0, 4): 30, ("chat", 8, 4): 26,
         ("chat", 0, 8): 16, ("chat", 8, 8): 12, ("copy", 0, 1): 44, ("copy", 8, 1): 80,
         ("copy", 0, 4): 30, ("copy", 8, 4): 36, ("copy", 0, 8): 16, ("copy", 8, 8): 15}


def fill(store, requests: int = 6) -> None:  # noqa: F811 - the fixture
    records = []
    for (domain, k, load), speed in SPEED.items():
        for i in range(requests):
            r = aggregate(domain, k, steps=20, accepted=20 if k else 0, drafted=40 if k else 0,
                          seconds=(40 if k else 20) / speed, ts=T0 + 3600 + i, target="t2")
            records.append(dataclasses.replace(r, load=load))
    store.write_records(records)
    store.flush(NOW)


def test_the_k_of_best_speed_at_each_load_pod_wide_and_per_domain(store):  # noqa: F811
    fill(store)
    by = {s.name: s for s in schedules(speeds(store, T0, NOW))}
    assert by["chat"].by_band == {0: 8, 1: 8, 2: 0, 3: 0}  # band 1 (2 in flight) carried from band 0
    assert by["chat"].measured == (0, 2, 3)
    assert by["copy"].by_band == {0: 8, 1: 8, 2: 8, 3: 0}
    # pod-wide at 3-4 in flight, 360 tokens a domain: off 360/30 + 360/30 = 24 s, k8 360/26 + 360/36 = 23.8 s
    assert by["pod"].by_band == {0: 8, 1: 8, 2: 8, 3: 0}


def test_too_few_requests_count_for_nothing(store):  # noqa: F811
    fill(store, requests=2)
    assert schedules(speeds(store, T0, NOW)) == []


def test_schedules_as_the_engines_take_them():
    s = Schedule("pod", {0: 8, 1: 8, 2: 0, 3: 0}, (0, 2, 3))
    assert s.by_batch() == {2: 8, MAX_BATCH: 0}
    vllm = json.loads(engine_config("vllm", s).split("'")[1])
    assert vllm == {"num_speculative_tokens": 8, "num_speculative_tokens_per_batch_size": {"2": 8, "2048": 0}}
    assert engine_config("trtllm", s) == f"draft_len_schedule: {{2: 8, {MAX_BATCH}: 0}}"
    assert "pools off, k8 behind specwatch proxy" in engine_config("llamacpp", s)
    assert Schedule("d", {0: 8, 1: 4, 2: 4}, (0, 1, 2)).by_batch() == {1: 8, MAX_BATCH: 4}
    assert engine_config("vllm", Schedule("d", {0: 0}, (0,))).startswith("no --speculative-config")


def test_the_command_prints_the_schedules(tmp_path, store):  # noqa: F811
    fill(store)
    run = command(tmp_path)[0]
    out = run("--engine", "vllm")
    assert out.exit_code == 0, out.output
    assert "num_speculative_tokens_per_batch_size" in out.output and "by load" in out.output
    data = json.loads(run("--format", "json", "--engine", "trtllm").output)
    pod = next(s for s in data["load_schedules"] if s["name"] == "pod")
    assert pod["engines"]["trtllm"] == f"draft_len_schedule: {{4: 8, {MAX_BATCH}: 0}}"
