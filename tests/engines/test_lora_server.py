"""A LoRA adapter written by specwatch (agent/pretrained/lora_gguf.py) loaded by a real llama-server with
``--lora``: llama.cpp's log-probabilities equal transformers' with the same adapter attached (the tiny kit's
float32 target, every projection adapted, q and k included), they differ from the base model's (so the
comparison has power), the adapter loaded at scale 0 gives the base back, and /lora-adapters lists the file.
Skipped only when llama.cpp is not installed."""

import copy

import httpx
import pytest
import torch
from llama_helpers import hf_logprobs, server_complete

from agent.engines.llamacpp import EXACT_ARGS, LlamaServer, LlamaServerConfig, LlamaServerError, find_binary
from agent.kit import layout, tokenizer
from agent.kit.load import load_model
from agent.pretrained import lora
from agent.pretrained.lora_gguf import export_adapter

try:
    find_binary()
except LlamaServerError as exc:
    pytest.skip(f"llama-server not installed ({exc})", allow_module_level=True)

SPEC = lora.LoraSpec(rank=4, alpha=8.0, targets=lora.TARGETS + ("q_proj", "k_proj"))


@pytest.fixture(scope="module")
def base(kit_home):
    return load_model(layout.kit_dir("tiny", kit_home) / "target-v1", device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def adapted(base, tiny_gguf, tmp_path_factory):
    """(transformers model with a random adapter, the adapter's GGUF)."""
    model = copy.deepcopy(base)
    lora.attach(model, SPEC)
    torch.manual_seed(0)
    with torch.no_grad():
        for layer in lora.layers(model).values():
            layer.lora_B.normal_(0, 0.05)
    folder = tmp_path_factory.mktemp("adapter")
    lora.save(model, folder / "peft", SPEC, dtype=torch.float32)
    out = folder / "lora.gguf"
    export_adapter(folder / "peft", out, tiny_gguf["target-v1"].path, dtype="f32")
    return model, out


@pytest.fixture(scope="module")
def prompts(kit_home):
    return [tokenizer.encode(text) for texts in layout.load_prompts(layout.kit_dir("tiny", kit_home)).values()
            for text in texts[:2]]


def _serve(tiny_gguf, tmp_path, **kwargs):
    config = LlamaServerConfig(model=tiny_gguf["target-v1"].path, ctx_size=256, threads=1, extra_args=EXACT_ARGS,
                               **kwargs)
    return LlamaServer(config, log_path=tmp_path / "server.log")


def _worst_error(server, model, prompts) -> float:
    worst = 0.0
    for ids in prompts:
        answer = server_complete(server.base_url, ids, 12, n_probs=5)
        theirs = hf_logprobs(model, ids, answer["tokens"])
        for position, step in enumerate(answer["completion_probabilities"]):
            for entry in step["top_logprobs"]:
                worst = max(worst, abs(entry["logprob"] - theirs[position, entry["id"]].item()))
    return worst


def test_llama_cpp_applies_the_adapter_as_transformers_does(tiny_gguf, adapted, base, prompts, tmp_path):
    model, gguf_file = adapted
    with _serve(tiny_gguf, tmp_path, lora=gguf_file) as server:
        listed = httpx.get(server.base_url + "/lora-adapters", timeout=10).raise_for_status().json()
        assert [(a["path"], a["scale"]) for a in listed] == [(str(gguf_file), 1.0)]
        assert _worst_error(server, model, prompts) < 2e-4
        assert _worst_error(server, base, prompts) > 1e-2  # power: the adapter moves the answer


def test_an_adapter_loaded_at_scale_zero_is_the_base(tiny_gguf, adapted, base, prompts, tmp_path):
    _, gguf_file = adapted
    with _serve(tiny_gguf, tmp_path, lora=gguf_file, lora_scale=0.0) as server:
        listed = httpx.get(server.base_url + "/lora-adapters", timeout=10).raise_for_status().json()
        assert [a["scale"] for a in listed] == [0.0]
        assert _worst_error(server, base, prompts) < 2e-4
