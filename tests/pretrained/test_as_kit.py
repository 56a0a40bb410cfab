"""The seam that lets kit-shaped benchmarks take the real model (agent/pretrained/as_kit.py, ``Kit.encode``):
on the tiny kit, ``prompt_ids`` goes through the kit's own ``encode``; on SmolLM2-135M (skipped, with the reason,
without its package or without target v2's adapter) the prepared model comes back as a Kit whose prompts are the
held-out workload prompts and ``logs``, encoded exactly as ``chat_ids`` encodes them."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root: bench/ is not installed

from agent.kit import tokenizer  # noqa: E402
from agent.pretrained import as_kit, logs  # noqa: E402
from agent.pretrained.teacher import chat_ids  # noqa: E402
from bench import guard as guard_bench  # noqa: E402


def test_prompt_ids_go_through_the_kits_encode(tiny_kit):
    domain = tiny_kit.domains[0]
    texts = tiny_kit.prompts[domain]
    assert tiny_kit.prompt_ids(domain) == [tokenizer.encode(t) for t in texts]
    other = dataclasses.replace(tiny_kit, encode=lambda text: [len(text), 7])
    assert other.prompt_ids(domain) == [[len(t), 7] for t in texts]


def test_guard_bench_sample_without_top_up_takes_the_prompts_there_are():
    class Stub:
        domains = ["a", "b"]
        prompts = {"a": ["x1", "x2", "x3"], "b": ["y1"]}

        def heldout(self):
            raise AssertionError("no held-out text to top up from")

    assert guard_bench.sample(Stub(), 5, top_up=False) == {"a": ["x1", "x2", "x3"], "b": ["y1"]}
    assert guard_bench.sample(Stub(), 2, top_up=False) == {"a": ["x1"], "b": ["y1"]}


def test_the_real_model_as_a_kit(real_model):
    if real_model.lora is None:
        pytest.skip("no target v2 adapter is installed for this model (specwatch models pretrained --lora-v2)")
    from transformers import AutoTokenizer

    kit = as_kit.from_prepared(real_model, domains=("copy", logs.DOMAIN))
    assert kit.domains == ["copy", "logs"]
    assert len(kit.prompts["logs"]) == len(logs.prompts("heldout"))
    tok = AutoTokenizer.from_pretrained(real_model.hf)
    for domain in kit.domains:
        first = as_kit.heldout(domain)[0]
        assert first.split == "heldout"
        assert kit.prompt_ids(domain)[0] == chat_ids(tok, first.messages)
    assert kit.versions["draft"] == real_model.draft_version
    assert len(set(kit.versions.values())) == 3  # the adapter changes target v2's weights
    assert kit.manifest["target_v2"]["version"] == real_model.lora_version
