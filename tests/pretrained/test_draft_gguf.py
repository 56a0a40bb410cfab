"""A draft exported to GGUF carries the target's tokenizer, field for field (llama.cpp refuses a draft
whose vocabulary differs from the target's)."""

import gguf
import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from agent.kit.gguf import export_model, tokenizer_fields

VOCAB = 300


def _source_gguf(path):
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list([f"t{i}" for i in range(VOCAB)])
    writer.add_token_types([1] * VOCAB)
    writer.add_token_merges(["t 1", "t 2"])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_chat_template("{{ messages }}")
    writer.add_tensor("token_embd.weight", np.zeros((VOCAB, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _model_dir(tmp_path, vocab=VOCAB):
    config = LlamaConfig(vocab_size=vocab, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32,
                         tie_word_embeddings=True)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(tmp_path / "draft")
    return tmp_path / "draft"


def test_the_targets_tokenizer_fields_are_copied(tmp_path):
    source = _source_gguf(tmp_path / "target.gguf")
    out = tmp_path / "draft.gguf"
    export_model(_model_dir(tmp_path), out, dtype="f16", tokenizer_from=source)
    assert tokenizer_fields(out) == tokenizer_fields(source)
    reader = gguf.GGUFReader(out)
    assert reader.fields["general.architecture"].contents() == "llama"
    assert {t.name for t in reader.tensors} >= {"token_embd.weight", "blk.0.attn_q.weight", "output_norm.weight"}


def test_a_vocabulary_size_mismatch_is_refused(tmp_path):
    source = _source_gguf(tmp_path / "target.gguf")
    with pytest.raises(ValueError, match="over 301 token ids; expected llama over 300"):
        export_model(_model_dir(tmp_path, vocab=VOCAB + 1), tmp_path / "x.gguf", tokenizer_from=source)


def test_a_file_without_a_tokenizer_is_refused(tmp_path):
    path = tmp_path / "bare.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_tensor("x", np.zeros(2, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ValueError, match="no tokenizer.ggml.tokens"):
        tokenizer_fields(path)
