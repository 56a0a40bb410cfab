"""Greedy continuations and log-probabilities from transformers and from a running llama-server."""

from __future__ import annotations

import httpx
import torch

from agent.kit import tokenizer


def hf_greedy(model, ids: list[int], n: int) -> list[int]:
    """transformers' greedy generate: new tokens only (stops at EOS like llama.cpp)."""
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False, top_k=None, top_p=None,
                             eos_token_id=tokenizer.EOS_ID, pad_token_id=tokenizer.PAD_ID)
    return out[0, len(ids):].tolist()


def hf_logprobs(model, ids: list[int], new: list[int]) -> torch.Tensor:
    """Log-probabilities of the next token at each of ``new``'s positions: (len(new), vocab)."""
    with torch.no_grad():
        logits = model(torch.tensor([ids + new])).logits[0, len(ids) - 1:len(ids) + len(new) - 1]
    return torch.log_softmax(logits.double(), -1)


def server_complete(base_url: str, ids: list[int], n: int, **extra) -> dict:
    """llama-server's /completion at temperature 0 from token ids (the whole JSON answer)."""
    body = {"prompt": ids, "n_predict": n, "temperature": 0.0, "cache_prompt": False, "return_tokens": True}
    return httpx.post(f"{base_url}/completion", timeout=120.0, json=body | extra).raise_for_status().json()


def server_greedy(base_url: str, ids: list[int], n: int) -> tuple[list[int], dict]:
    """(new token ids, timings) of a greedy completion."""
    answer = server_complete(base_url, ids, n)
    return answer["tokens"], answer["timings"]
