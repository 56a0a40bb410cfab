"""The target's own answers to the training prompts, as token ids, from a running engine.

llama.cpp's server decodes the quantized target many times faster than transformers on a CPU, and it is the
engine the draft will serve beside, so its greedy answers are the path to distil on. Each conversation is
put in the chat template by the target's tokenizer; the engine gets the token ids (so no second tokenizer
is involved) and returns the answer's ids (``/completion`` with ``return_tokens``).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence

import httpx


def chat_ids(tokenizer, conversation: list[dict]) -> list[int]:
    """The conversation in the chat template, ready for the assistant's answer, as token ids."""
    ids = tokenizer.apply_chat_template(conversation, tokenize=True, add_generation_prompt=True)
    return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)


def engine_streams(base_url: str, tokenizer, conversations: Sequence[list[dict]], new_tokens: int = 96,
                   concurrency: int = 4, progress: Callable[[int, int], None] | None = None,
                   timeout: float = 300.0) -> list[list[int]]:
    """Prompt ids followed by the engine's greedy answer ids (up to ``new_tokens``, with its end-of-turn
    token when it stopped there), one list per conversation, in order."""
    prompts = [chat_ids(tokenizer, c) for c in conversations]
    done = 0

    def one(client: httpx.Client, ids: list[int]) -> list[int]:
        nonlocal done
        answer = client.post(base_url.rstrip("/") + "/completion", json={
            "prompt": ids, "n_predict": new_tokens, "temperature": 0.0, "top_k": 1, "cache_prompt": False,
            "return_tokens": True, "samplers": ["top_k"]})
        answer.raise_for_status()
        body = answer.json()
        tokens = list(body.get("tokens") or [])
        eos = tokenizer.eos_token_id
        if (body.get("stop_type") == "eos" or body.get("stopped_eos")) and tokens[-1:] != [eos]:
            tokens.append(eos)  # the end of the turn is part of what the draft should predict
        done += 1
        if progress is not None:
            progress(done, len(prompts))
        return ids + tokens

    with httpx.Client(timeout=timeout) as client, ThreadPoolExecutor(concurrency) as pool:
        return list(pool.map(lambda ids: one(client, ids), prompts))
