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

from agent.decoder import crop, forward
from agent.devices import synchronize
from policies.goodput import leviathan_tokens, step_seconds


@dataclass(frozen=True)
class CostModel:
    """Measured seconds: ``draft`` per drafted token, ``verify[K]`` per target pass over K+1 tokens."""

    device: str
    context: int  # tokens in the KV cache when measured
    draft: float
    verify: tuple[float, ...]  # index K: K = 0 is a plain target step

    def __post_init__(self) -> None:
        if not self.draft > 0 or not self.verify or any(not v > 0 for v in self.verify):
            raise ValueError("CostModel: draft and verify[0..K] must be positive seconds")

    @property
    def target_step(self) -> float:
        """One plain target step (K = 0)."""
        return self.verify[0]

    def step_seconds(self, k: int) -> float:
        return step_seconds(k, self.draft, self.verify)

    def verify_ratio(self, k: int) -> float:
        """verify(K) / one target step: 1 in Leviathan's model."""
        return self.verify[k] / self.target_step

    @property
    def c(self) -> float:
        """Leviathan's cost ratio: one draft forward / one target step."""
        return self.draft / self.target_step


def predicted_rate(a: float, lookaheads: list[int], costs: CostModel) -> float:
    """Tokens/s the cost model predicts for steps run with these lookaheads (one entry per step; the last
    steps of a generation are shortened to its budget) at per-token acceptance a."""
    tokens = sum(leviathan_tokens(a, k) for k in lookaheads)
    return tokens / sum(costs.step_seconds(k) for k in lookaheads)


def measure(target, draft, context_ids: list[int], max_k: int, *, repeats: int = 30) -> CostModel:
    """Time the models' forward passes on ``context_ids`` (the median of ``repeats`` passes each).

    The draft is timed feeding one token (a drafting step), the target feeding K+1 tokens for K = 0..max_k
    (a verification). Every pass runs on the same cached context and is cropped back after it.
    """
    if not context_ids:
        raise ValueError("context_ids: at least one token is required")
    device = next(target.parameters()).device
    draft_seconds = _median_pass(draft, context_ids, 1, repeats)
    verify = tuple(_median_pass(target, context_ids, k + 1, repeats) for k in range(max_k + 1))
    return CostModel(device=str(device), context=len(context_ids), draft=draft_seconds, verify=verify)


@torch.inference_mode()
def _median_pass(model, context_ids: list[int], n: int, repeats: int) -> float:
    device = next(model.parameters()).device
    _, cache = forward(model, context_ids, None, 1)
    feed = (context_ids * n)[-n:]
    times = []
    for i in range(repeats + 2):  # two warm-up passes
        synchronize(device)
        start = time.perf_counter()
        logits, cache = forward(model, feed, cache, n)
        int(logits[0, -1].argmax())  # the decoder reads a token back after each pass
        synchronize(device)
        if i >= 2:
            times.append(time.perf_counter() - start)
        crop(cache, len(context_ids))
    return statistics.median(times)
