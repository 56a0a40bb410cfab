"""Turning logits into the distribution a token is drawn from; the same rules for draft and target.

Speculative sampling is exact only if the draft's q and the target's p are processed identically
(temperature, then top-k, then top-p) before the accept test, so both go through ``probabilities``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """temperature 0 means greedy; top_k 0 and top_p 1.0 switch those filters off."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0

    def __post_init__(self) -> None:
        if not self.temperature >= 0.0:
            raise ValueError(f"temperature: must be >= 0, got {self.temperature}")
        if not isinstance(self.top_k, int) or self.top_k < 0:
            raise ValueError(f"top_k: must be an integer >= 0, got {self.top_k!r}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p: must be in (0, 1], got {self.top_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def probabilities(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Softmax of ``logits`` (..., V) after temperature, top-k and top-p, in float32 or wider.

    In greedy mode the temperature is taken as 1: the result is then the model's plain distribution,
    used for the expected-acceptance and confidence signals, never for choosing tokens.
    """
    logits = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
    if not params.greedy:
        logits = logits / params.temperature
        if params.top_k and params.top_k < logits.shape[-1]:
            kth = torch.topk(logits, params.top_k, dim=-1).values[..., -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        if params.top_p < 1.0:
            logits = _top_p(logits, params.top_p)
    return torch.softmax(logits, dim=-1)


def _top_p(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose probability reaches top_p (at least one)."""
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
    cumulative = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
    # drop a token when the tokens before it already reach top_p
    drop_sorted = (cumulative - torch.softmax(sorted_logits, dim=-1)) >= top_p
    drop = drop_sorted.scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def residual(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """normalize(max(0, p - q)): where a rejected position's replacement is drawn from.

    When p == q nothing is ever rejected; falling back to p keeps the function total.
    """
    diff = torch.clamp(p - q, min=0.0)
    total = diff.sum(dim=-1, keepdim=True)
    return torch.where(total > 0, diff / total.clamp_min(torch.finfo(diff.dtype).tiny), p)


def overlap(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """sum_x min(p(x), q(x)): the probability that a token drafted from q is accepted under p."""
    return torch.minimum(p, q).sum(dim=-1)
