"""The decoder's cost model, measured: seconds of one draft forward and of one target verification of K+1
tokens, per K, on the device the models run on.

Leviathan's speed-up (1 - a^(K+1)) / ((1 - a)(K c + 1)) (arXiv 2211.17192) takes verifying K+1 tokens to cost
one target step. On a GPU, where a small batch of tokens is memory-bound, that holds; on a CPU the target's
matrix products are compute-bound and scoring K+1 tokens costs more (1.1-1.7x one step on the kit). The model
here keeps the formula's shape and replaces its two constants by measured costs: a step with lookahead K takes
``K * draft + verify[K]`` seconds and emits ``(1 - a^(K+1)) / (1 - a)`` tokens on average.

The costs are those of the models' forward passes alone, measured on a KV cache of ``context`` tokens, each
pass cropped back afterwards (as the decoder does after a rejection): what any decoder of these two models
must pay. What a decoder spends beyond them (sampling, the accept test, cache bookkeeping, Python) is the gap
between its tokens/s and this model's prediction.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from agent.decoding.decoder import crop, forward, model_device
from agent.decoding.devices import synchronize
from policies.goodput import StepCost, leviathan_tokens


@dataclass(frozen=True)
class Measured:
    """A step cost measured on ``device`` with ``context`` tokens in the KV cache."""

    cost: StepCost
    device: str
    context: int


def predicted_rate(a: float, lookaheads: list[int], cost: StepCost) -> float:
    """Tokens/s the cost model predicts for steps run with these lookaheads (one entry per step; the last
    steps of a generation are shortened to its budget) at per-token acceptance a."""
    tokens = sum(leviathan_tokens(a, k) for k in lookaheads)
    return tokens / sum(cost.step_seconds(k) for k in lookaheads)


def typical_context(prompts: list[list[int]], new_tokens: int, limit: int | None = None) -> list[int]:
    """Token ids as long as a decoding step's mean context over these prompts: a prompt plus half the new
    tokens (at most ``limit``); the costs depend on the length, not on which tokens."""
    tokens = [t for p in prompts for t in p]
    if not tokens:
        raise ValueError("prompts: at least one token is required")
    length = round(len(tokens) / len(prompts) + new_tokens / 2)
    length = max(1, min(length, limit) if limit is not None else length)
    return (tokens * (length // len(tokens) + 1))[:length]


def measure(target, draft, context_ids: list[int], max_k: int, *, repeats: int = 30,
            warmup: int = 2) -> Measured:
    """Time the models' forward passes on ``context_ids``: the median of ``repeats`` passes each.

    The draft is timed feeding one token (a drafting step), the target feeding K+1 tokens for K = 0..max_k
    (a verification). Every pass runs on the same cached context and is cropped back after it. The passes
    are taken in rounds, one of each kind per round, so that a change in the machine's load hits every cost
    alike instead of skewing the ratios between them.
    """
    if not context_ids:
        raise ValueError("context_ids: at least one token is required")
    if max_k < 0 or repeats < 1 or warmup < 0:
        raise ValueError(f"max_k >= 0, repeats >= 1 and warmup >= 0 required, got {max_k}, {repeats}, {warmup}")
    kinds = [(draft, 1)] + [(target, k + 1) for k in range(max_k + 1)]
    times: list[list[float]] = [[] for _ in kinds]
    with torch.inference_mode():
        caches = {id(m): forward(m, context_ids, None, 1)[1] for m in (target, draft)}
        for round_ in range(warmup + repeats):
            for i, (model, n) in enumerate(kinds):
                seconds = _timed_pass(model, caches[id(model)], context_ids, n)
                if round_ >= warmup:
                    times[i].append(seconds)
    medians = [statistics.median(t) for t in times]
    device = model_device(target)
    return Measured(StepCost(medians[0], tuple(medians[1:])), str(device), len(context_ids))


def _timed_pass(model, cache, context_ids: list[int], n: int) -> float:
    """Seconds of one forward of ``n`` tokens on the cached context (which is cropped back after it)."""
    device = model_device(model)
    feed = (context_ids * n)[-n:]
    synchronize(device)
    start = time.perf_counter()
    logits, _ = forward(model, feed, cache, n)
    int(logits[0, -1].argmax())  # the decoder reads a token back after each pass
    synchronize(device)
    seconds = time.perf_counter() - start
    crop(cache, len(context_ids))
    return seconds
