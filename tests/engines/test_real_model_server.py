"""The real pretrained model as its package ships it (SmolLM2-135M-Instruct, Q4_1) on the llama.cpp build
`make engine` installs: it decodes without speculation, with n-gram self-speculation (ngram-mod, and
--spec-default drafting up to 64) and with the draft specwatch distilled for it, and every answer's timings
add up. Q4_1 runs where the CPU backend would once pick AMX code the virtual machine had not enabled
(SIGILL): the build is portable (.ci/install-llama) and carries no AMX variant. Skipped, with the reason,
without llama-server or without the model's package."""

from pathlib import Path

import httpx
import pytest

from agent.engines.llamacpp import LlamaServer, LlamaServerConfig, LlamaServerError, find_binary

try:
    BINARY = find_binary()
except LlamaServerError as exc:
    pytest.skip(f"llama-server not installed ({exc})", allow_module_level=True)

COPY = ("Here is a note:\n\nNew ChainMap with a new map followed by all previous maps. If no map is provided, "
        "an empty dict is used. Keyword arguments update the new map.\n\nWrite the note again, unchanged.")
# Greedy answers on quantized weights are not bit-identical across batch shapes (a verify pass, a cached
# prompt): a near tie can flip a word. What must hold is the copy itself.
SENTENCE = "New ChainMap with a new map followed by all previous maps."


def _serve(real_model, tmp_path, **kwargs) -> LlamaServer:
    config = LlamaServerConfig(model=real_model.target_gguf, ctx_size=1024, threads=1, **kwargs)
    return LlamaServer(config, log_path=tmp_path / "server.log").start()


def _chat(server: LlamaServer, text: str, tokens: int = 48) -> dict:
    body = {"messages": [{"role": "user", "content": text}], "max_tokens": tokens, "temperature": 0.0}
    return httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=120).raise_for_status().json()


@pytest.fixture(scope="module")
def plain_answer(real_model, tmp_path_factory):
    with _serve(real_model, tmp_path_factory.mktemp("plain")) as server:
        return _chat(server, COPY)


def test_the_build_is_portable_and_has_no_amx_variant():
    variants = {p.name for p in Path(BINARY).parent.glob("libggml-cpu-*.so")}
    assert {"libggml-cpu-haswell.so", "libggml-cpu-skylakex.so", "libggml-cpu-x64.so"} <= variants
    assert "libggml-cpu-sapphirerapids.so" not in variants


def test_q4_1_as_shipped_decodes(plain_answer):
    assert SENTENCE in plain_answer["choices"][0]["message"]["content"]
    t = plain_answer["timings"]
    assert t["predicted_n"] >= 16 and not t.get("draft_n")


@pytest.mark.parametrize("kwargs", [{"speculation": "ngram-mod", "lookahead": 8, "draft_min": 2},
                                    {"speculation": "default"}], ids=["ngram-mod-k8", "spec-default-k64"])
def test_ngram_self_speculation_drafts_and_keeps_the_answer(real_model, tmp_path, kwargs):
    with _serve(real_model, tmp_path, **kwargs) as server:
        _chat(server, COPY)  # the n-gram table now holds the answer's text too
        answer = _chat(server, COPY)
    t = answer["timings"]
    cap = LlamaServerConfig(model=real_model.target_gguf, **kwargs).lookahead
    assert t["draft_n"] > 0 and 0 < t["draft_n_accepted"] <= t["draft_n"]
    steps = t["predicted_n"] - t["draft_n_accepted"]
    assert 1 <= steps and t["draft_n"] <= cap * steps
    assert SENTENCE in answer["choices"][0]["message"]["content"]


def test_the_distilled_draft_speculates(real_model, tmp_path):
    if real_model.draft_gguf is None:
        pytest.skip("no distilled draft is shipped for the model")
    with _serve(real_model, tmp_path, draft=real_model.draft_gguf, lookahead=3) as server:
        answer = _chat(server, COPY)
    t = answer["timings"]
    assert t["draft_n"] > 0 and t["draft_n_accepted"] > 0
    assert t["draft_n"] <= 3 * (t["predicted_n"] - t["draft_n_accepted"])
    assert SENTENCE in answer["choices"][0]["message"]["content"]
