"""How target v2 differs from v1, per domain: greedy answers from an engine (or from transformers in-process),
and the draft's acceptance on each.

In greedy speculation a drafted token is accepted exactly when it is the token the target writes next, so the
draft's per-token acceptance against a target is the share of the target's answer tokens that the draft,
given the answer so far, predicts as its argmax (one forward pass of the draft per answer; the same figure as
the guard's greedy acceptance, without running the target).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from agent.pretrained.draft import teacher_streams
from agent.pretrained.teacher import chat_ids, engine_streams
from agent.workload.prompts import Prompt


@dataclass(frozen=True)
class Answer:
    """One prompt's token ids and where the engine's greedy answer starts in them."""

    prompt: Prompt
    ids: tuple[int, ...]
    start: int

    @property
    def answer(self) -> tuple[int, ...]:
        return self.ids[self.start:]


def answers(base_url: str, tokenizer, prompts: Sequence[Prompt], new_tokens: int = 48, concurrency: int = 2,
            progress: Callable[[int, int], None] | None = None) -> list[Answer]:
    """The engine's greedy answers to ``prompts``, in order."""
    streams = engine_streams(base_url, tokenizer, [p.messages for p in prompts], new_tokens, concurrency,
                             progress)
    return [Answer(p, tuple(s), len(chat_ids(tokenizer, p.messages))) for p, s in zip(prompts, streams)]


def local_answers(model: torch.nn.Module, tokenizer, prompts: Sequence[Prompt], new_tokens: int = 48,
                  progress: Callable[[int, int], None] | None = None) -> list[Answer]:
    """``model``'s greedy answers to ``prompts`` in-process (transformers, batched), in order."""
    streams = teacher_streams(model, tokenizer, [p.messages for p in prompts], new_tokens, progress=progress)
    return [Answer(p, tuple(s), len(chat_ids(tokenizer, p.messages))) for p, s in zip(prompts, streams)]


def shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens two answers share."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


@torch.inference_mode()
def draft_accepts(draft: torch.nn.Module, answer: Answer) -> tuple[int, int]:
    """(tokens the draft would have drafted right, answer tokens) for one greedy answer."""
    if len(answer.answer) == 0:
        return 0, 0
    ids = torch.tensor([answer.ids])
    logits = draft(input_ids=ids[:, :-1], use_cache=False).logits[0]
    guessed = logits[answer.start - 1:].argmax(-1)
    return int((guessed == ids[0, answer.start:]).sum()), len(answer.answer)


def summarise(v1: Sequence[Answer], v2: Sequence[Answer], draft: torch.nn.Module | None = None) -> dict:
    """Per-domain figures for answers of v1 and v2 to the same prompts (in the same order)."""
    if [a.prompt for a in v1] != [a.prompt for a in v2]:
        raise ValueError("v1 and v2 answers must be to the same prompts, in the same order")
    out: dict[str, dict] = {}
    for domain in dict.fromkeys(a.prompt.domain for a in v1):
        pairs = [(a, b) for a, b in zip(v1, v2) if a.prompt.domain == domain]
        changed = [a.answer != b.answer for a, b in pairs]
        row = {"prompts": len(pairs), "changed": sum(changed), "changed_share": round(sum(changed) / len(pairs), 3),
               "shared_prefix_tokens": round(sum(shared_prefix(a.answer, b.answer) for a, b in pairs) / len(pairs), 1),
               "v1_tokens": round(sum(len(a.answer) for a, _ in pairs) / len(pairs), 1),
               "v2_tokens": round(sum(len(b.answer) for _, b in pairs) / len(pairs), 1)}
        if draft is not None:
            for name, side in (("v1", [a for a, _ in pairs]), ("v2", [b for _, b in pairs])):
                hit = total = 0
                for answer in side:
                    h, t = draft_accepts(draft, answer)
                    hit, total = hit + h, total + t
                row[f"draft_acceptance_{name}"] = round(hit / total, 3) if total else None
        out[domain] = row
    return out
