"""The GGUF exporter against transformers, without a llama.cpp build: a numpy forward pass in llama.cpp's
conventions (gguf_reference) must give transformers' logits, and the vocabulary must spell the kit's ids."""

import gguf
import numpy as np
import pytest
import torch
from gguf_reference import logits

from agent.kit import gguf as kit_gguf
from agent.kit import layout, tokenizer
from agent.kit.load import KitNotBuiltError, load_model

PROMPTS = ["def add(a, b):\n    return a + b\n", "The river ran high that spring, and", "ERROR 2024-01-01 db:",
           "naïve café — ünïcode ✓"]


def _hf_logits(model_dir, ids):
    model = load_model(model_dir, device="cpu", dtype="float32")
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].double().numpy()


@pytest.mark.parametrize("model", layout.MODELS)
def test_gguf_forward_equals_transformers(kit_home, tiny_gguf, model):
    for text in PROMPTS:
        ids = tokenizer.encode(text)
        ours = logits(tiny_gguf[model].path, ids)
        theirs = _hf_logits(layout.kit_dir("tiny", kit_home) / model, ids)
        assert np.abs(ours - theirs).max() < 1e-3, text
        assert (ours.argmax(-1) == theirs.argmax(-1)).all(), text


def test_without_rope_interleave_the_forward_differs(kit_home, tiny_gguf, tmp_path, monkeypatch):
    """Power: q/k rows left in HF's order give other logits (so the test above checks the permutation)."""
    monkeypatch.setattr(kit_gguf, "rope_interleave", lambda weight, heads: weight)
    path = tmp_path / "unpermuted.gguf"
    kit_gguf.export_model(layout.kit_dir("tiny", kit_home) / "target-v1", path)
    ids = tokenizer.encode(PROMPTS[0])
    assert np.abs(logits(path, ids) - _hf_logits(layout.kit_dir("tiny", kit_home) / "target-v1", ids)).max() > 1e-2


def test_vocabulary_spells_bytes_in_order():
    tokens, types, merges = kit_gguf.vocabulary()
    assert len(tokens) == tokenizer.VOCAB_SIZE == 259
    assert tokens[:3] == ["<pad>", "</s>", "<unk>"]
    spell = kit_gguf.byte_to_unicode()
    assert len(set(spell.values())) == 256  # reversible
    back = {char: b for b, char in spell.items()}
    assert [back[t] for t in tokens[3:]] == list(range(256))
    assert spell[ord("A")] == "A" and spell[ord(" ")] == "Ġ" and spell[ord("\n")] == "Ċ"  # GPT-2's table
    assert types[:3] == [gguf.TokenType.CONTROL, gguf.TokenType.CONTROL, gguf.TokenType.UNKNOWN]
    assert set(types[3:]) == {gguf.TokenType.NORMAL}
    assert len(merges) == 1
    first, second = merges[0].split(" ")
    assert bytes([back[first], back[second]]).decode("utf-8", errors="replace") == "\ufffd\ufffd"


def test_metadata_follows_the_hf_config(kit_home, tiny_gguf):
    reader = gguf.GGUFReader(tiny_gguf["draft"].path)
    config = load_model(layout.kit_dir("tiny", kit_home) / "draft", device="cpu").config

    def value(key):
        field = reader.fields[key]
        data = field.parts[field.data[0]]
        return bytes(data).decode() if field.types[0] == gguf.GGUFValueType.STRING else data[0]

    assert value("general.architecture") == "llama"
    assert value("tokenizer.ggml.model") == "gpt2"
    assert value("llama.context_length") == config.max_position_embeddings
    assert value("llama.attention.head_count") == config.num_attention_heads
    assert value("llama.rope.freq_base") == pytest.approx(config.rope_parameters["rope_theta"])
    assert value("llama.attention.layer_norm_rms_epsilon") == pytest.approx(config.rms_norm_eps)
    assert value("tokenizer.ggml.eos_token_id") == tokenizer.EOS_ID
    assert value("tokenizer.ggml.padding_token_id") == tokenizer.PAD_ID
    assert not value("tokenizer.ggml.add_bos_token")
    assert "tokenizer.ggml.bos_token_id" not in reader.fields


def test_files_are_named_by_model_and_version(kit_home, tiny_gguf):
    versions = layout.read_manifest(layout.kit_dir("tiny", kit_home))["versions"]
    for model, item in tiny_gguf.items():
        assert item.path.name == f"{model}-{versions[model]}-f32.gguf"
        assert item.version == versions[model]


def test_f16_halves_the_matrices(kit_home, tmp_path):
    (item,) = kit_gguf.export_kit("tiny", out=tmp_path, models=["draft"], dtype="f16", home=kit_home,
                                  progress=lambda _: None)
    assert item.path.name.endswith("-f16.gguf")
    types = {t.name: t.tensor_type for t in gguf.GGUFReader(item.path).tensors}
    assert types["blk.0.attn_q.weight"] == gguf.GGMLQuantizationType.F16
    assert types["blk.0.attn_norm.weight"] == gguf.GGMLQuantizationType.F32


def test_unbuilt_kit_and_bad_arguments_are_named(tmp_path, kit_home):
    with pytest.raises(KitNotBuiltError, match="specwatch models build --size tiny"):
        kit_gguf.export_kit("tiny", home=tmp_path / "empty", progress=lambda _: None)
    with pytest.raises(ValueError, match="models: expected"):
        kit_gguf.export_kit("tiny", models=["target-v3"], home=kit_home)
    with pytest.raises(ValueError, match="dtype: expected"):
        kit_gguf.export_kit("tiny", dtype="q4", home=kit_home)
