"""The real pretrained model prepared for transformers: its files, versions and weights, and real answers.
Skipped when its package is not installed (the ``real_model`` fixture in tests/conftest.py says how)."""

import gguf
import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from agent.pretrained import catalog, source
from agent.pretrained.prepare import Prepared, prepare
from specwatch_core.files import sha256_of


@pytest.fixture(scope="module")
def hf_target(real_model):
    model = AutoModelForCausalLM.from_pretrained(real_model.hf, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(real_model.hf)


def test_files_and_versions(real_model):
    shipped = source.locate(catalog.SMOLLM2)
    assert real_model.target_version == sha256_of(shipped)[:12]
    assert real_model.target_gguf.name == f"target-{real_model.target_version}-q4_1.gguf"
    assert sha256_of(real_model.target_gguf) == sha256_of(shipped)
    assert Prepared.read(real_model.name, real_model.root.parent.parent) == real_model


def test_a_second_prepare_redoes_nothing(real_model):
    said = []
    prepare(home=real_model.root.parent.parent, say=said.append, install_missing=False)
    assert said == []


def test_the_checkpoint_holds_the_gguf_weights(real_model, hf_target):
    """Every tensor came across: the token embedding, dequantized from the GGUF by gguf's own reader,
    equals the checkpoint's (the output layer is tied to it)."""
    model, _ = hf_target
    reader = gguf.GGUFReader(real_model.target_gguf)
    tensor = next(t for t in reader.tensors if t.name == "token_embd.weight")
    expected = gguf.quants.dequantize(tensor.data, tensor.tensor_type).reshape(49152, 576)
    assert np.allclose(model.get_input_embeddings().weight.detach().numpy(), expected, atol=1e-6)
    assert model.get_output_embeddings().weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    assert sum(p.numel() for p in model.parameters()) == 134_515_008


def test_a_real_answer(hf_target):
    model, tokenizer = hf_target
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                        add_generation_prompt=True, return_tensors="pt", return_dict=True)
    out = model.generate(**ids, max_new_tokens=12, do_sample=False, top_p=None, top_k=None, temperature=None)
    assert "Paris" in tokenizer.decode(out[0, ids["input_ids"].shape[1]:])
