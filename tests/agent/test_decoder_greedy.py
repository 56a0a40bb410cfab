"""Greedy speculative decoding must reproduce the target's own greedy output token for token."""

import pytest
import torch

from agent.decoding.decoder import SpeculativeDecoder, StepContext
from tiny_models import gpt2, llama, perturbed

PROMPTS = [[1, 2, 3], [5], [7, 7, 7, 7, 9, 11, 2], list(range(1, 20))]


_REFERENCE = {}


def target_greedy(model, prompt, n):
    """Reference: plain greedy decoding, recomputing the whole sequence each token (no cache)."""
    key = (id(model), tuple(prompt), n)
    if key not in _REFERENCE:
        _REFERENCE[key] = _greedy(model, prompt, n)
    return _REFERENCE[key]


def _greedy(model, prompt, n):
    ids = list(prompt)
    with torch.inference_mode():
        for _ in range(n):
            logits = model(torch.tensor([ids])).logits[0, -1]
            ids.append(int(torch.argmax(logits)))
    return ids[len(prompt):]


def pairs():
    t = gpt2(seed=0)
    yield "gpt2-close", t, perturbed(t, 0.05)
    yield "gpt2-unrelated", t, gpt2(layers=1, width=16, seed=5)
    t = llama(seed=0)
    yield "llama-close", t, perturbed(t, 0.05)
    yield "llama-unrelated", t, llama(layers=1, width=16, seed=5)


PAIRS = list(pairs())


@pytest.mark.parametrize("name,target,draft", PAIRS, ids=[p[0] for p in PAIRS])
@pytest.mark.parametrize("k", range(1, 9))
def test_greedy_matches_target_for_every_fixed_k(name, target, draft, k):
    decoder = SpeculativeDecoder(target, draft)
    for prompt in PROMPTS:
        gen = decoder.generate(prompt, 24, lookahead=k)
        assert gen.tokens == target_greedy(target, prompt, 24)
        assert sum(s.emitted for s in gen.steps) == 24
        assert all(s.lookahead <= k for s in gen.steps)


@pytest.mark.parametrize("name,target,draft", PAIRS, ids=[p[0] for p in PAIRS])
def test_greedy_matches_target_with_lookahead_changing_every_step(name, target, draft):
    schedule = [3, 0, 8, 1, 5, 2, 7, 4, 6]
    seen = []

    def lookahead(ctx: StepContext) -> int:
        seen.append(ctx)
        return schedule[ctx.step % len(schedule)]

    decoder = SpeculativeDecoder(target, draft)
    for prompt in PROMPTS:
        seen.clear()
        gen = decoder.generate(prompt, 30, lookahead=lookahead, domain="code")
        assert gen.tokens == target_greedy(target, prompt, 30)
        assert [c.step for c in seen] == list(range(len(gen.steps)))
        assert seen[0].previous is None and seen[1].previous is gen.steps[0]
        assert all(c.generated + c.remaining == 30 for c in seen)
        for ctx, step in zip(seen, gen.steps):
            assert step.lookahead == min(schedule[ctx.step % len(schedule)], ctx.remaining - 1)


def test_close_draft_is_mostly_accepted_and_unrelated_draft_mostly_rejected():
    # Guards the tests above: equality must hold on both the accept and the reject paths.
    name, target, close = PAIRS[0]
    gen = SpeculativeDecoder(target, close).generate(PROMPTS[2], 60, lookahead=4)
    assert gen.acceptance_rate > 0.6
    name, target, unrelated = PAIRS[1]
    gen = SpeculativeDecoder(target, unrelated).generate(PROMPTS[2], 60, lookahead=4)
    assert gen.acceptance_rate < 0.5
    assert any(s.accepted == s.lookahead for s in gen.steps) or gen.acceptance_rate < 0.2


@pytest.mark.parametrize("name,target,draft", PAIRS[:3:2], ids=[PAIRS[0][0], PAIRS[2][0]])
def test_lookahead_zero_is_plain_target_decoding(name, target, draft):
    gen = SpeculativeDecoder(target, draft).generate(PROMPTS[3], 20, lookahead=0)
    assert gen.tokens == target_greedy(target, PROMPTS[3], 20)
    assert len(gen.steps) == 20
    for s in gen.steps:
        assert (s.lookahead, s.accepted, s.emitted) == (0, 0, 1)
        assert s.accepted_mask == [] and s.expected_acceptance == [] and s.draft_confidence == []
        assert s.draft_seconds >= 0 and s.verify_seconds > 0


def test_caches_are_cropped_not_recomputed():
    """The target sees each kept token once: total tokens fed = prompt + drafted + emitted - 1 - ..."""
    name, target, draft = PAIRS[0]
    fed = []
    hook = target.register_forward_pre_hook(
        lambda mod, args, kwargs: fed.append(kwargs["input_ids"].shape[1]), with_kwargs=True)
    try:
        prompt = PROMPTS[2]
        gen = SpeculativeDecoder(target, draft).generate(prompt, 40, lookahead=4)
    finally:
        hook.remove()
    assert len(fed) == len(gen.steps)  # one target forward per step
    # each step feeds the previous step's new token plus its drafts; only the first feeds the prompt
    assert fed[0] == len(prompt) + gen.steps[0].lookahead
    assert fed[1:] == [1 + s.lookahead for s in gen.steps[1:]]
