"""What each step reports: expected acceptance, confidence, masks, versions, early stop, limits."""

import pytest
import torch

from agent.decoding import sampling
from agent.decoding.decoder import SpeculativeDecoder
from agent.decoding.versions import weights_version
from tiny_models import gpt2, llama, perturbed

PROMPT = [3, 1, 4, 1, 5, 9, 2, 6]


@pytest.fixture(scope="module")
def pair():
    target = gpt2(seed=0)
    return target, perturbed(target, 0.05)


def independent_overlap(target, draft, prefix, params):
    """sum_x min(p, q) at the position after ``prefix``, recomputed without any cache."""
    batch = torch.tensor([prefix])
    with torch.inference_mode():
        p = sampling.probabilities(target(batch).logits[0, -1], params)
        q = sampling.probabilities(draft(batch).logits[0, -1], params)
    return float(torch.minimum(p, q).sum())


@pytest.mark.parametrize("params", [dict(), dict(temperature=0.8, top_k=10, top_p=0.95)],
                         ids=["greedy", "sampling"])
def test_expected_acceptance_is_sum_of_min_p_q(pair, params):
    target, draft = pair
    gen = SpeculativeDecoder(target, draft, seed=4, **params).generate(PROMPT, 30, lookahead=3)
    sp = sampling.SamplingParams(**params)
    seq, start, checked = PROMPT + gen.tokens, len(PROMPT), 0
    for step in gen.steps:
        # Accepted drafted tokens are in the output, so the prefix of positions 1..accepted+1 is known.
        for pos in range(1, min(step.accepted + 1, step.lookahead) + 1):
            want = independent_overlap(target, draft, seq[: start + pos - 1], sp)
            assert step.expected_acceptance[pos - 1] == pytest.approx(want, abs=1e-9)
            checked += 1
        start += step.emitted
    assert checked > 10


def test_greedy_confidence_and_mask(pair):
    target, draft = pair
    gen = SpeculativeDecoder(target, draft).generate(PROMPT, 40, lookahead=4)
    for s in gen.steps:
        assert len(s.accepted_mask) == len(s.draft_confidence) == len(s.expected_acceptance) == s.lookahead
        assert s.accepted_mask == [1] * s.accepted + [0] * (s.lookahead - s.accepted)
        assert all(0 < c <= 1 for c in s.draft_confidence)
        assert s.emitted == s.accepted + 1
        s.validate()


def test_versions_default_to_weight_hashes_and_can_be_given(pair):
    target, draft = pair
    gen = SpeculativeDecoder(target, draft).generate(PROMPT, 5, lookahead=2)
    assert gen.steps[0].target_version == weights_version(target) != weights_version(draft)
    assert gen.steps[0].draft_version == weights_version(draft)
    gen = SpeculativeDecoder(target, draft, target_version="v2", draft_version="d1").generate(
        PROMPT, 5, lookahead=2, domain="code", pod="pod-a")
    assert {(s.target_version, s.draft_version, s.domain, s.pod) for s in gen.steps} == {
        ("v2", "d1", "code", "pod-a")}


def test_stop_drafting_ends_the_step_early_but_keeps_output_exact(pair):
    target, draft = pair
    calls = []

    def stop(confidence, position):
        calls.append((confidence, position))
        return position >= 2

    plain = SpeculativeDecoder(target, draft).generate(PROMPT, 30, lookahead=6)
    gen = SpeculativeDecoder(target, draft).generate(PROMPT, 30, lookahead=6, stop_drafting=stop)
    assert gen.tokens == plain.tokens
    assert max(s.lookahead for s in gen.steps) == 2 < max(s.lookahead for s in plain.steps)
    assert calls and all(0 < c <= 1 for c, _ in calls)


def test_eos_stops_generation(pair):
    target, draft = pair
    full = SpeculativeDecoder(target, draft).generate(PROMPT, 30, lookahead=3).tokens
    eos = full[5]
    gen = SpeculativeDecoder(target, draft).generate(PROMPT, 30, lookahead=3, eos_token_id=eos)
    assert gen.tokens == full[: full.index(eos) + 1]


def test_bad_arguments_are_named():
    target = gpt2()
    with pytest.raises(ValueError, match="draft: vocabulary"):
        SpeculativeDecoder(target, gpt2(vocab=40))
    decoder = SpeculativeDecoder(target, gpt2(seed=2))
    with pytest.raises(ValueError, match="max_new_tokens"):
        decoder.generate(PROMPT, 1000)
    with pytest.raises(ValueError, match="lookahead"):
        decoder.generate(PROMPT, 5, lookahead=lambda ctx: -1)
    with pytest.raises(ValueError, match="input_ids"):
        decoder.generate([], 5)
    with pytest.raises(ValueError, match="temperature"):
        SpeculativeDecoder(target, gpt2(seed=2), temperature=-1)


def test_device_and_dtype_options_move_the_models():
    target, draft = llama(seed=0), llama(seed=1, layers=1)
    decoder = SpeculativeDecoder(target, draft, device="auto", dtype="float32")
    assert next(decoder.target.parameters()).dtype == torch.float32
    assert decoder.device.type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert len(decoder.generate(PROMPT, 10, lookahead=3).tokens) == 10
