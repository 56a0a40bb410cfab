"""The LoRA code on a tiny random llama (no real model): the update is applied where it should be, merges into
the same model, survives a save and load, and training it teaches the answer while the base stays frozen."""

import copy

import pytest
import torch
from tiny_models import llama

from agent.pretrained import lora
from agent.pretrained.target_v2 import answer_loss, batch_tensors, kept_loss, train_adapter
from agent.pretrained.v2_data import Example

IDS = torch.tensor([[1, 5, 9, 3, 7, 2, 11, 4]])


def _logits(model):
    with torch.no_grad():
        return model(input_ids=IDS).logits


def _randomised(model, seed=0):
    """Give every adapter a non-zero B (a fresh one is zero, so it would change nothing)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for layer in lora.layers(model).values():
            layer.lora_B.normal_(0, 0.5)
    return model


def _adapted_model(base, spec=lora.LoraSpec(rank=4)):
    model = copy.deepcopy(base)
    lora.attach(model, spec)
    return model


def test_a_fresh_adapter_changes_nothing():
    base = llama()
    adapted = _adapted_model(base)
    assert len(lora.layers(adapted)) == 2 * 5  # 2 layers x v, o, gate, up, down
    assert torch.equal(_logits(base), _logits(adapted))


def test_the_update_is_w_plus_scale_b_a():
    """The adapted forward equals the base model with each targeted weight replaced by W + alpha/r B A,
    computed here from the tensors; and it differs from the base (the adapter is applied)."""
    base = llama()
    spec = lora.LoraSpec(rank=4, alpha=8.0, targets=("q_proj", "v_proj", "down_proj"))
    adapted = _randomised(_adapted_model(base, spec))
    by_hand = copy.deepcopy(base)
    with torch.no_grad():
        for name, layer in lora.layers(adapted).items():
            by_hand.get_submodule(name).weight += (spec.alpha / spec.rank) * layer.lora_B @ layer.lora_A
    assert torch.allclose(_logits(adapted), _logits(by_hand), atol=1e-9)
    assert (_logits(adapted) - _logits(base)).abs().max() > 1e-2
    assert {n.rsplit(".", 1)[-1] for n in lora.layers(adapted)} == {"q_proj", "v_proj", "down_proj"}


def test_merge_gives_a_plain_model_with_the_same_output():
    adapted = _randomised(_adapted_model(llama()))
    expected = _logits(adapted)
    merged = lora.merge(adapted)
    assert not lora.layers(merged)
    assert torch.allclose(_logits(merged), expected, atol=1e-9)


def test_save_and_load_give_the_same_model(tmp_path):
    base = llama()
    adapted = _randomised(_adapted_model(base))
    lora.save(adapted, tmp_path / "adapter", lora.LoraSpec(rank=4), dtype=torch.float64)
    loaded = lora.load(copy.deepcopy(base), tmp_path / "adapter")
    assert torch.allclose(_logits(loaded), _logits(adapted), atol=1e-12)
    saved = lora.pairs(tmp_path / "adapter")
    assert "model.layers.0.self_attn.v_proj" in saved and saved["model.layers.0.self_attn.v_proj"][0].shape == (4, 32)
    assert lora.read_spec(tmp_path / "adapter") == lora.LoraSpec(rank=4)


def test_only_the_adapter_trains_and_it_learns_the_answer():
    """A few steps on one example make the base's wrong answer the argmax; the base weights are untouched.
    (logit_scale: a random tiny model's output layer is too small for any hidden state to pick one token.)"""
    base = llama(logit_scale=50.0)
    model = _adapted_model(base, lora.LoraSpec(rank=4, alpha=8.0))
    example = Example("logs", (1, 5, 9, 3, 12, 13, 14), answer_start=4)  # answer: 12 13 14
    ids, mask, labels = batch_tensors([example], pad=0)
    assert labels.tolist() == [[-100, -100, -100, 12, 13, 14]]
    before = float(answer_loss(model, ids, mask, labels).detach())
    train_adapter(model, [example], pad=0, steps=100, lr=5e-2, changed=1, kept=0, precision="float32")
    assert float(answer_loss(model, ids, mask, labels).detach()) < before / 4
    with torch.no_grad():
        guessed = model(input_ids=ids, attention_mask=mask).logits[0, 3:].argmax(-1).tolist()
    assert guessed == [12, 13, 14]
    for name, p in base.named_parameters():
        mine = name.replace(".weight", ".base.weight") if name.rsplit(".", 2)[-2] in lora.TARGETS else name
        assert torch.equal(model.get_parameter(mine), p), name


def test_disabled_gives_the_base_model_back_inside_the_block_only():
    base = llama()
    adapted = _randomised(_adapted_model(base))
    before = _logits(adapted)
    with lora.disabled(adapted):
        assert torch.equal(_logits(adapted), _logits(base))
    assert torch.equal(_logits(adapted), before)


def test_kept_loss_is_zero_for_a_fresh_adapter_and_positive_once_it_moves():
    model = _adapted_model(llama())
    batch = batch_tensors([Example("chat", (1, 5, 9, 3, 12, 13, 14), answer_start=4)], pad=0)
    assert float(kept_loss(model, *batch).detach()) == pytest.approx(0.0, abs=1e-9)
    _randomised(model)
    assert float(kept_loss(model, *batch).detach()) > 1e-3


@pytest.mark.parametrize("weight", [1.0, 0.0])
def test_the_kl_term_keeps_the_other_domains_distributions(weight):
    """Learning a new answer on one domain moves the model elsewhere too; the KL term to v1 on a replayed
    example of another domain holds that one close (weight 0, the term switched off, must not)."""
    base = llama(logit_scale=50.0)
    model = _adapted_model(base, lora.LoraSpec(rank=4, alpha=8.0))
    change = Example("logs", (1, 5, 9, 3, 12, 13, 14), answer_start=4)
    keep = Example("chat", (1, 7, 2, 10, 6, 2, 8), answer_start=4)
    kept_batch = batch_tensors([keep], pad=0)
    train_adapter(model, [change, keep], pad=0, steps=100, lr=5e-2, changed=1, kept=1, kept_weight=weight,
                  precision="float32")
    drift = float(kept_loss(model, *kept_batch).detach())
    assert float(answer_loss(model, *batch_tensors([change], pad=0))) < 0.5  # the change is learnt either way
    if weight:
        assert drift < 0.5  # 0.07 when written; 15.8 with the term off
    else:
        assert drift > 5.0


@pytest.mark.parametrize("kwargs, field", [({"rank": 0}, "rank"), ({"alpha": 0}, "alpha"),
                                           ({"targets": ()}, "targets")])
def test_bad_spec_names_the_field(kwargs, field):
    with pytest.raises(ValueError, match=f"LoraSpec.{field}"):
        lora.LoraSpec(**kwargs)


def test_attach_says_when_nothing_matches():
    with pytest.raises(ValueError, match="no linear layer named nothing"):
        lora.attach(llama(), lora.LoraSpec(targets=("nothing",)))
