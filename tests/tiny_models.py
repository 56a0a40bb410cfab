"""Tiny random-weight causal LMs for decoder tests (never used by the demo or benchmarks)."""

from __future__ import annotations

import copy
import logging

import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

logging.getLogger("transformers").setLevel(logging.ERROR)


def gpt2(vocab: int = 32, layers: int = 2, width: int = 32, seed: int = 0) -> GPT2LMHeadModel:
    torch.manual_seed(seed)
    # A wide initialisation so greedy output varies instead of repeating one token.
    config = GPT2Config(vocab_size=vocab, n_embd=width, n_layer=layers, n_head=2, n_positions=256,
                        initializer_range=0.2, bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(config).double().eval()


def llama(vocab: int = 32, layers: int = 2, width: int = 32, seed: int = 0,
          logit_scale: float = 1.0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab, hidden_size=width, intermediate_size=2 * width,
                         num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=1,
                         max_position_embeddings=256, tie_word_embeddings=False,
                         bos_token_id=0, eos_token_id=0, pad_token_id=0)
    model = LlamaForCausalLM(config).double().eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(logit_scale)
    return model


def perturbed(model, noise: float, seed: int = 1):
    """A copy of ``model`` with relative gaussian noise on every weight: a draft that mostly agrees."""
    torch.manual_seed(seed)
    other = copy.deepcopy(model)
    with torch.no_grad():
        for p in other.parameters():
            p.mul_(1 + noise * torch.randn_like(p))
    return other
