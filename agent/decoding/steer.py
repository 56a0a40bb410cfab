"""Drive the decoder with a policy (``choose`` before every step, ``update`` with every step's record), or with
a sidecar (``decide`` and ``record``)."""

from __future__ import annotations

import time

from agent.decoding.decoder import Generation, SpeculativeDecoder, StepContext
from policies.base import Outcome, Policy


def generate(decoder: SpeculativeDecoder, policy: Policy, input_ids, max_new_tokens: int,
             domain: str = "default", **kwargs) -> Generation:
    """``decoder.generate`` with the lookahead (and early stop) of ``policy``, which learns as it goes.

    The decoder clamps K near the end of the budget and records what it actually drafted, so the
    policy always learns from what ran.
    """

    def lookahead(ctx: StepContext) -> int:
        if ctx.previous is not None:
            policy.update(domain, Outcome.of(ctx.previous))
        return policy.choose(domain).lookahead

    gen = decoder.generate(input_ids, max_new_tokens, lookahead, domain,
                           stop_drafting=policy.stop_drafting(domain), **kwargs)
    if gen.steps:
        policy.update(domain, Outcome.of(gen.steps[-1]))
    return gen


def generate_with(sidecar, decoder: SpeculativeDecoder, input_ids, max_new_tokens: int, domain: str = "default",
                  *, hot_path_ns: list[int] | None = None, **kwargs) -> Generation:
    """``decoder.generate`` steered by a ``Sidecar``: it decides K before every step and records every step
    (each as soon as the next one starts, so it learns within a request). ``hot_path_ns``, when given,
    gets the nanoseconds each step spent in ``record`` + ``decide`` on this (the decoding) thread."""

    def lookahead(ctx: StepContext) -> int:
        start = time.perf_counter_ns()
        if ctx.previous is not None:
            sidecar.record(ctx.previous)
        k = sidecar.decide(domain).lookahead
        if hot_path_ns is not None:
            hot_path_ns.append(time.perf_counter_ns() - start)
        return k

    gen = decoder.generate(input_ids, max_new_tokens, lookahead, domain,
                           stop_drafting=sidecar.stop_drafting(domain), pod=sidecar.pod, **kwargs)
    if gen.steps:
        sidecar.record(gen.steps[-1])
    return gen
