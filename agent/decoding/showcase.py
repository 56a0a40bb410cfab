"""Side-by-side decoding of held-out prompts: target alone against speculative decoding."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from agent.decoding.decoder import Generation, SpeculativeDecoder


@dataclass(frozen=True)
class DomainRun:
    domain: str
    prompt: list[int]
    tokens: list[int]  # the speculative output (identical to the target's in greedy mode)
    identical: bool | None  # greedy: speculative output equals target-only output; None when sampling
    acceptance_rate: float
    tokens_per_step: float
    target_only_tps: float
    speculative_tps: float

    @property
    def speedup(self) -> float:
        return self.speculative_tps / self.target_only_tps


def _timed(fn: Callable[[], Generation]) -> tuple[float, Generation]:
    start = time.perf_counter()
    gen = fn()
    return time.perf_counter() - start, gen


def compare(decoder: SpeculativeDecoder, prompts: dict[str, list[int]], max_new_tokens: int,
            lookahead: int, on_done: Callable[[DomainRun], None] | None = None) -> list[DomainRun]:
    """For each domain's prompt: decode with the target alone (K = 0), then with K = ``lookahead``."""
    runs = []
    for domain, prompt in prompts.items():
        base_s, base = _timed(lambda: decoder.generate(prompt, max_new_tokens, 0, domain))
        spec_s, spec = _timed(lambda: decoder.generate(prompt, max_new_tokens, lookahead, domain))
        run = DomainRun(
            domain=domain, prompt=prompt, tokens=spec.tokens,
            identical=(spec.tokens == base.tokens) if decoder.params.greedy else None,
            acceptance_rate=spec.acceptance_rate,
            tokens_per_step=len(spec.tokens) / len(spec.steps),
            target_only_tps=len(base.tokens) / base_s, speculative_tps=len(spec.tokens) / spec_s)
        runs.append(run)
        if on_done:
            on_done(run)
    return runs
