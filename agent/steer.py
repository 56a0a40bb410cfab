"""Drive the decoder with a policy: ``choose`` before every step, ``update`` with every step's record."""

from __future__ import annotations

from agent.decoder import Generation, SpeculativeDecoder, StepContext
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
