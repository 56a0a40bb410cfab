"""Sampling mode is exact: the output is distributed as the target's own, whatever the draft.

The joint distribution of the first three generated tokens is computed exactly by enumerating every
prefix with the target (vocabulary 6, so 216 outcomes), then compared with the decoder's empirical
distribution by a chi-square goodness-of-fit test at significance ALPHA. The same test must reject
a decoder that skips the residual adjustment (it resamples from p instead of max(0, p - q)): that
is the test's proof of power.
"""

import collections

import pytest
import torch
from scipy import stats

from agent.decoding import sampling
from agent.decoding.decoder import SpeculativeDecoder
from tiny_models import llama

VOCAB, PROMPT, SAMPLES, ALPHA = 6, [1, 2], 3000, 0.001


@pytest.fixture(scope="module")
def models():
    # Peaky, unrelated distributions: the draft is often wrong, so rejections and residuals matter.
    target = llama(vocab=VOCAB, layers=1, width=16, seed=11, logit_scale=8.0)
    draft = llama(vocab=VOCAB, layers=1, width=16, seed=23, logit_scale=8.0)
    return target, draft


def exact_joint(target, params, n=3, prompt=PROMPT):
    """P(t1, ..., tn | prompt) under the target's processed distribution, by enumeration."""
    probs = {(): 1.0}
    with torch.inference_mode():
        for depth in range(n):
            prefixes = [p for p in probs if len(p) == depth]
            batch = torch.tensor([list(prompt) + list(p) for p in prefixes])
            dist = sampling.probabilities(target(batch).logits[:, -1], params)
            for prefix, row in zip(prefixes, dist.tolist()):
                for token, pr in enumerate(row):
                    probs[prefix + (token,)] = probs[prefix] * pr
    return {k: v for k, v in probs.items() if len(k) == n}


def chi_square_p(counts, expected_probs, samples):
    """Chi-square p-value; outcomes expected fewer than 5 times are pooled into one cell."""
    observed, expected, pooled_o, pooled_e = [], [], 0, 0.0
    for outcome, pr in expected_probs.items():
        e = pr * samples
        if e < 5:
            pooled_o, pooled_e = pooled_o + counts.get(outcome, 0), pooled_e + e
        else:
            observed.append(counts.get(outcome, 0))
            expected.append(e)
    if pooled_e > 0:
        observed.append(pooled_o)
        expected.append(pooled_e)
    return stats.chisquare(observed, expected).pvalue


def empirical(decoder_cls, target, draft, lookahead, seed, **params):
    decoder = decoder_cls(target, draft, seed=seed, **params)
    counts = collections.Counter()
    for _ in range(SAMPLES):
        counts[tuple(decoder.generate(PROMPT, 3, lookahead=lookahead).tokens)] += 1
    return counts


class SkipsResidual(SpeculativeDecoder):
    """Deliberately broken: replaces a rejected token with a draw from p, not max(0, p - q)."""

    def _residual(self, p, q):
        return p


CASES = {
    "t1-fixed-k2": (dict(temperature=1.0), 2),
    "t0.7-topk4-topp0.9-k-alternating": (
        dict(temperature=0.7, top_k=4, top_p=0.9), lambda ctx: (3, 1)[ctx.step % 2]),
}


@pytest.mark.parametrize("case", CASES)
def test_output_distribution_equals_target(models, case):
    target, draft = models
    params, lookahead = CASES[case]
    counts = empirical(SpeculativeDecoder, target, draft, lookahead, seed=1, **params)
    expected = exact_joint(target, sampling.SamplingParams(**params))
    assert abs(sum(expected.values()) - 1) < 1e-9
    assert chi_square_p(counts, expected, SAMPLES) > ALPHA


@pytest.mark.parametrize("case", CASES)
def test_the_same_test_rejects_a_decoder_without_the_residual(models, case):
    target, draft = models
    params, lookahead = CASES[case]
    counts = empirical(SkipsResidual, target, draft, lookahead, seed=1, **params)
    expected = exact_joint(target, sampling.SamplingParams(**params))
    assert chi_square_p(counts, expected, SAMPLES) < ALPHA


def test_draft_disagrees_often_enough_for_the_test_to_mean_something(models):
    target, draft = models
    gen = SpeculativeDecoder(target, draft, temperature=1.0, seed=3).generate(PROMPT, 200, lookahead=2)
    assert 0.1 < gen.acceptance_rate < 0.9
