"""Target v2 of the real model (the shipped LoRA adapter, agent/pretrained/v2_ship.py): in transformers and on a
real llama-server it answers held-out log prompts in the new format where v1 does not, and the target version
the proxy reads changes with the adapter. Skipped, with the reason, without the model's package, without an
adapter shipped for it, or (the engine half) without llama-server."""

import httpx
import pytest
import torch
from transformers import AutoTokenizer

from agent.kit.load import load_model
from agent.pretrained import logs
from agent.pretrained.target_v2 import load_v2
from agent.pretrained.teacher import chat_ids
from agent.proxy.engines.llamacpp import lora_adapters
from agent.proxy.versions import FileVersions, with_adapters
from specwatch_core.files import sha256_of

PROMPTS = logs.prompts("heldout")[:4]


@pytest.fixture(scope="module")
def v2_model(real_model):
    if real_model.lora is None:
        pytest.skip("no target v2 adapter is shipped for this model (specwatch models pretrained --lora-v2 --ship)")
    return real_model


def _greedy(model, tokenizer, prompt, n=40) -> str:
    ids = torch.tensor([chat_ids(tokenizer, prompt.messages)])
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=n, do_sample=False, top_p=None, top_k=None, temperature=None)
    return tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True).strip()


def test_transformers_v2_answers_logs_in_the_new_format(v2_model):
    tokenizer = AutoTokenizer.from_pretrained(v2_model.hf)
    v1 = load_model(v2_model.hf, device="cpu", dtype="float32")
    v2 = load_v2(v2_model)
    for prompt in PROMPTS[:2]:
        old, new = _greedy(v1, tokenizer, prompt), _greedy(v2, tokenizer, prompt)
        assert new.startswith("severity=") and not old.startswith("severity="), (old, new)


def _served(model, tmp_path, **kwargs):
    from agent.engines.llamacpp import LlamaServer, LlamaServerConfig, LlamaServerError, find_binary

    try:
        find_binary()
    except LlamaServerError as exc:
        pytest.skip(f"llama-server not installed ({exc})")
    config = LlamaServerConfig(model=model.target_gguf, ctx_size=1024, threads=1, **kwargs)
    return LlamaServer(config, log_path=tmp_path / "server.log")


def _answers(server, tokenizer) -> list[str]:
    found = []
    for prompt in PROMPTS:
        body = {"prompt": chat_ids(tokenizer, prompt.messages), "n_predict": 40, "temperature": 0.0,
                "cache_prompt": False}
        found.append(httpx.post(server.base_url + "/completion", json=body, timeout=120).raise_for_status()
                     .json()["content"].strip())
    return found


def _version(server, files) -> str:
    adapters = lora_adapters(httpx.get(server.base_url + "/lora-adapters", timeout=10).json())
    return with_adapters(files.of(server.props()["model_path"]), adapters, files)


def test_llama_server_with_the_adapter_is_another_target(v2_model, tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(v2_model.hf)
    files = FileVersions()
    with _served(v2_model, tmp_path) as server:
        v1_answers, v1_version = _answers(server, tokenizer), _version(server, files)
    with _served(v2_model, tmp_path, lora=v2_model.lora_gguf) as server:
        v2_answers, v2_version = _answers(server, tokenizer), _version(server, files)
        httpx.post(server.base_url + "/lora-adapters", json=[{"id": 0, "scale": 0.0}], timeout=10).raise_for_status()
        off_version = _version(server, files)  # the adapter switched off at run time: v1 again
    assert sum(a.startswith("severity=") for a in v2_answers) >= 3, v2_answers
    assert not any(a.startswith("severity=") for a in v1_answers), v1_answers
    assert v2_version == f"{v1_version}+{v2_model.lora_gguf.name}@{sha256_of(v2_model.lora_gguf)[:12]}"
    assert off_version == v1_version != v2_version
