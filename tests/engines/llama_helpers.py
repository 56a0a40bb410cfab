"""Greedy continuations from transformers and from a running llama-server, as token ids."""

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


def server_greedy(base_url: str, ids: list[int], n: int) -> tuple[list[int], dict]:
    """llama-server's /completion at temperature 0 from token ids: (new token ids, timings)."""
    answer = httpx.post(f"{base_url}/completion", timeout=120.0, json={
        "prompt": ids, "n_predict": n, "temperature": 0.0, "cache_prompt": False, "return_tokens": True,
    }).raise_for_status().json()
    return answer["tokens"], answer["timings"]
