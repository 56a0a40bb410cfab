"""The GGUF LoRA adapter file, read back with gguf's own reader (no llama.cpp needed): the keys llama.cpp checks,
tensor names after the base weights, A and B in the orientation llama.cpp multiplies, q and k rows permuted
as the base's are. tests/engines/test_lora_server.py loads such a file into a real llama-server."""

import copy

import gguf
import numpy as np
import pytest
import torch
from tiny_models import llama

from agent.kit.gguf import rope_interleave
from agent.pretrained import lora
from agent.pretrained.lora_gguf import export_adapter, gguf_name

SPEC = lora.LoraSpec(rank=4, alpha=8.0, targets=("q_proj", "k_proj", "v_proj", "o_proj", "up_proj"))


@pytest.fixture
def written(tmp_path):
    base = tmp_path / "base.gguf"
    writer = gguf.GGUFWriter(base, "llama")
    writer.add_head_count(2)
    writer.add_head_count_kv(1)
    writer.add_tensor("token_embd.weight", np.zeros((4, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    model = copy.deepcopy(llama())
    lora.attach(model, SPEC)
    torch.manual_seed(0)
    with torch.no_grad():
        for layer in lora.layers(model).values():
            layer.lora_B.normal_()
    lora.save(model, tmp_path / "adapter", SPEC, dtype=torch.float32)
    out = tmp_path / "lora.gguf"
    count = export_adapter(tmp_path / "adapter", out, base, name="test adapter", dtype="f32")
    return gguf.GGUFReader(out), lora.pairs(tmp_path / "adapter"), count


def test_the_keys_llama_cpp_checks(written):
    reader, _, _ = written
    fields = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    assert fields["general.type"] == "adapter" and fields["adapter.type"] == "lora"
    assert fields["general.architecture"] == "llama" and fields["adapter.lora.alpha"] == pytest.approx(8.0)


def test_tensors_are_named_after_the_base_weights_in_its_orientation(written):
    reader, pairs, count = written
    tensors = {t.name: t for t in reader.tensors}
    assert count == len(tensors) == 2 * 2 * 5  # 2 layers x 5 targets x (A, B)
    a, b = pairs["model.layers.1.self_attn.v_proj"]
    ta, tb = tensors["blk.1.attn_v.weight.lora_a"], tensors["blk.1.attn_v.weight.lora_b"]
    # llama.cpp: a.ne[0] == the weight's ne[0] (in), b.ne[1] == its ne[1] (out), a.ne[1] == b.ne[0] (rank)
    assert list(ta.shape) == [32, 4] and list(tb.shape) == [4, 16]
    assert np.array_equal(ta.data, a.numpy()) and np.array_equal(tb.data, b.numpy())
    up_a, _ = pairs["model.layers.0.mlp.up_proj"]
    assert list(tensors["blk.0.ffn_up.weight.lora_a"].shape) == [32, 4] and up_a.shape == (4, 32)


def test_q_and_k_rows_are_permuted_like_the_base(written):
    reader, pairs, _ = written
    tensors = {t.name: t for t in reader.tensors}
    q_b = pairs["model.layers.0.self_attn.q_proj"][1].numpy()
    k_b = pairs["model.layers.0.self_attn.k_proj"][1].numpy()
    assert np.array_equal(tensors["blk.0.attn_q.weight.lora_b"].data, rope_interleave(q_b, 2))
    assert np.array_equal(tensors["blk.0.attn_k.weight.lora_b"].data, rope_interleave(k_b, 1))
    assert not np.array_equal(rope_interleave(q_b, 2), q_b)  # the permutation is not the identity here


@pytest.mark.parametrize("module, name", [("model.layers.12.self_attn.o_proj", "blk.12.attn_output.weight"),
                                          ("model.layers.0.mlp.down_proj", "blk.0.ffn_down.weight")])
def test_names(module, name):
    assert gguf_name(module) == name


@pytest.mark.parametrize("module", ["lm_head", "model.layers.0.self_attn.rotary", "model.embed_tokens"])
def test_layers_llama_cpp_cannot_adapt_are_refused(module):
    with pytest.raises(ValueError, match="no tensor"):
        gguf_name(module)
