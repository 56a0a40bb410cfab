"""Sampling through transformers' generate() steered by specwatch keeps the target's distribution.

The machinery of test_decoder_sampling.py: the exact joint distribution of the first three tokens by
enumeration with the target (vocabulary 6), against the empirical distribution of SAMPLES generations, by a
chi-square test at ALPHA. Its power: the same test must reject a candidate generator that hands
transformers a wrong draft distribution (uniform) for the accept test and the residual. Prompt lookup too
(no draft model, no draft distribution: transformers keeps looked-up tokens while they equal the target's
samples), and the test rejects a lookup that claims its tokens were drawn uniformly.
"""

import collections

import pytest
import torch
from hf_helpers import Scripted
from test_decoder_sampling import ALPHA, CASES, PROMPT, SAMPLES, chi_square_p, exact_joint, models  # noqa: F401

from agent.decoding import sampling
from agent.hf import SpecwatchCandidateGenerator, SpecwatchLookupGenerator, Steering
from specwatch_core.records import drafted_of
from storage import Store

# The decoder tests' lookahead schedules as scripts of the sidecar's decisions (K = 0 steps added).
SCRIPTS = {"t1-fixed-k2": [2], "t0.7-topk4-topp0.9-k-alternating": [3, 1, 0]}


@pytest.fixture(scope="module")
def pair(models):
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    for model in models:  # token 0 is EOS in these models: no early end, as in the decoder's test
        model.generation_config.eos_token_id = None
    yield models
    torch.set_num_threads(previous)


class FlatDraft(SpecwatchCandidateGenerator):
    """Deliberately broken: tells transformers the draft's distribution was uniform."""

    def get_candidates(self, input_ids, **kwargs):
        ids, logits = super().get_candidates(input_ids, **kwargs)
        return ids, None if logits is None else torch.zeros_like(logits)


class FlatSteering(Steering):
    candidates = FlatDraft


class LookupSteering(Steering):
    """Steering by prompt lookup; the draft model it is handed is left out."""

    def __init__(self, sidecar, draft, domain):
        super().__init__(sidecar, None, domain, prompt_lookup=True)


class FlatLookup(SpecwatchLookupGenerator):
    """Deliberately broken: tells transformers its tokens were drawn from a uniform distribution (the
    accept test then keeps a token with probability min(1, p / (1/V)), not p)."""

    def get_candidates(self, input_ids, **kwargs):
        ids, _ = super().get_candidates(input_ids, **kwargs)
        n = ids.shape[1] - input_ids.shape[1]
        return ids, torch.zeros(1, n, self.vocab_size, dtype=torch.float32) if n else None


class FlatLookupSteering(LookupSteering):
    lookup = FlatLookup


def empirical(steering_cls, target, draft, script, tmp_path, seed, prompt=PROMPT, **params):
    torch.manual_seed(seed)  # transformers samples from torch's global generator
    counts = collections.Counter()
    with Store.open(f"sqlite:///{tmp_path / 'sampling.db'}") as store:
        steering = steering_cls(Scripted(store, script), draft, "sampling")
        ids = torch.tensor([prompt])
        drafted = 0
        for _ in range(SAMPLES):
            out = target.generate(ids, custom_generate=steering, max_new_tokens=3, do_sample=True,
                                  **params)
            counts[tuple(out[0, len(prompt):].tolist())] += 1
            drafted += sum(drafted_of(s) for s in steering.steps)
    assert drafted > SAMPLES  # the draft took part
    return counts


def p_value(steering_cls, pair, case, tmp_path) -> float:
    target, draft = pair
    params, _ = CASES[case]
    counts = empirical(steering_cls, target, draft, SCRIPTS[case], tmp_path, seed=1, **params)
    return chi_square_p(counts, exact_joint(target, sampling.SamplingParams(**params)), SAMPLES)


@pytest.mark.parametrize("case", CASES)
def test_output_distribution_equals_target(pair, case, tmp_path):
    assert p_value(Steering, pair, case, tmp_path) > ALPHA


@pytest.mark.parametrize("case", CASES)
def test_the_same_test_rejects_a_wrong_draft_distribution(pair, case, tmp_path):
    assert p_value(FlatSteering, pair, case, tmp_path) < ALPHA


LOOKUP_CASE = "t1-fixed-k2"
LOOKUP_PROMPT = [1, 2, 3, 1, 2, 3, 1, 2]  # its last n-grams occur earlier: the lookup drafts from step one


@pytest.mark.parametrize("steering_cls, exact", [(LookupSteering, True), (FlatLookupSteering, False)],
                         ids=["prompt-lookup", "lookup-claiming-uniform"])
def test_prompt_lookup_keeps_the_target_distribution_and_the_test_sees_a_wrong_one(pair, steering_cls, exact,
                                                                                  tmp_path):
    target, _ = pair
    params, _ = CASES[LOOKUP_CASE]
    counts = empirical(steering_cls, target, None, [2, 0, 3], tmp_path, seed=1, prompt=LOOKUP_PROMPT, **params)
    expected = exact_joint(target, sampling.SamplingParams(**params), prompt=LOOKUP_PROMPT)
    p = chi_square_p(counts, expected, SAMPLES)
    assert (p > ALPHA) == exact, p
