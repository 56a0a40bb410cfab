"""What target v2 is fine-tuned on: (token ids, index where the answer starts) examples.

- ``logs`` training prompts (agent/pretrained/logs.py), each answered with its line in the new format and the
  end-of-turn token: the change;
- training prompts of every other workload domain (code, edit, extract, chat, json, copy) answered by target v1
  itself (greedy, in-process): replayed so the adapter learns to leave those domains alone, as the kit's
  target v2 replays code and prose (agent/kit/specs.py); training holds v2's whole next-token distribution
  to v1's there (agent/pretrained/target_v2.py ``kept_loss``). Without them a format learnt on one domain
  leaks into the others' first tokens.

Only answer tokens are scored. Held-out prompts are never used here.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

from agent.pretrained import logs
from agent.workload import prompts as workload
from agent.pretrained.draft import teacher_streams
from agent.pretrained.teacher import chat_ids


@dataclass(frozen=True)
class Example:
    domain: str
    ids: tuple[int, ...]
    answer_start: int  # ids[answer_start:] is the answer, the only part scored


def changed(tokenizer) -> list[Example]:
    """Every ``logs`` training prompt answered in the new format."""
    out = []
    for p in logs.prompts("train"):
        prompt = chat_ids(tokenizer, p.messages)
        answer = tokenizer.encode(logs.rewrite(logs.line_of(p)), add_special_tokens=False)
        out.append(Example(p.domain, tuple(prompt + answer + [tokenizer.eos_token_id]), len(prompt)))
    return out


def kept_domains() -> list[str]:
    """The workload's domains target v2 must leave alone: all but the changed one."""
    return [d for d in workload.domains() if d != logs.DOMAIN]


def replayed(model, tokenizer, per_domain: int = 24, new_tokens: int = 48, seed: int = 0,
             progress: Callable[[int, int], None] | None = None) -> list[Example]:
    """``per_domain`` training prompts of each unchanged domain (a seeded sample), answered by ``model``
    (target v1) greedily, up to ``new_tokens`` tokens."""
    rng = random.Random(seed)
    chosen = []
    for domain in kept_domains():
        pool = workload.load(domain, "train")
        chosen += rng.sample(pool, min(per_domain, len(pool)))
    streams = teacher_streams(model, tokenizer, [p.messages for p in chosen], new_tokens=new_tokens,
                              batch_size=16, progress=progress)
    return [Example(p.domain, tuple(ids), len(chat_ids(tokenizer, p.messages))) for p, ids in zip(chosen, streams)]
