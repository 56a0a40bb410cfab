"""The draft's shape and its start from the target's embedding (no real model needed)."""

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from agent.pretrained.draft import DraftShape, new_draft, projected_embedding, stream_array


def _target(vocab=300, hidden=48):
    torch.manual_seed(1)
    config = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         tie_word_embeddings=True, bos_token_id=1, eos_token_id=2, pad_token_id=2)
    return LlamaForCausalLM(config)


def test_the_default_shape_fits_the_repository_budget():
    """10.3 M parameters over SmolLM2's 49,152 tokens: under 25 MB in float16 (tied output stored once)."""
    s = DraftShape()
    vocab = 49152
    per_layer = 2 * s.hidden * s.hidden + 2 * s.hidden * (s.hidden // s.heads) * s.kv_heads \
        + 3 * s.hidden * s.intermediate + 2 * s.hidden
    params = vocab * s.hidden + s.layers * per_layer + s.hidden
    assert params * 2 <= 25e6


def test_a_draft_shares_the_targets_vocabulary_and_special_tokens():
    target = _target()
    draft = new_draft(target, DraftShape(hidden=16, layers=1, heads=2, kv_heads=1, intermediate=32,
                                         max_positions=64))
    assert draft.config.vocab_size == target.config.vocab_size
    assert (draft.config.bos_token_id, draft.config.eos_token_id) == (1, 2)
    assert draft.config.tie_word_embeddings
    assert draft.get_output_embeddings().weight.data_ptr() == draft.get_input_embeddings().weight.data_ptr()


def test_projected_embedding_keeps_the_principal_directions():
    torch.manual_seed(0)
    # rows spread mostly along two directions: a 2-wide projection keeps nearly all the spread
    basis = torch.linalg.qr(torch.randn(32, 32))[0]
    rows = torch.randn(500, 2) * torch.tensor([5.0, 3.0]) @ basis[:2] + 0.01 * torch.randn(500, 32)
    out = projected_embedding(rows, 2)
    assert out.shape == (500, 2)
    assert torch.allclose(out.pow(2).mean().sqrt(), rows.pow(2).mean().sqrt(), rtol=1e-4)
    centred = rows - rows.mean(0)
    kept = (centred @ basis[:2].T).var(0).sum() / centred.var(0).sum()
    assert kept > 0.99
    # distances between rows survive the projection (up to the common scale)
    d_in, d_out = torch.cdist(centred[:50], centred[:50]), torch.cdist(out[:50], out[:50])
    assert torch.corrcoef(torch.stack([d_in.flatten(), d_out.flatten()]))[0, 1] > 0.99


@pytest.mark.parametrize("kwargs", [{"hidden": 0}, {"hidden": 10, "heads": 3}, {"heads": 3, "kv_heads": 2}])
def test_bad_shapes_are_refused(kwargs):
    with pytest.raises(ValueError, match="DraftShape"):
        DraftShape(**kwargs)


def test_streams_join_as_uint16():
    joined = stream_array([[1, 2], [49151]])
    assert joined.dtype.name == "uint16" and joined.tolist() == [1, 2, 49151]
