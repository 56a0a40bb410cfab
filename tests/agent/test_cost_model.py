"""The measured cost model: what it times, and the prediction it makes from the costs."""

from __future__ import annotations

import pytest

from agent.decoding import cost_model
from agent.decoding.cost_model import predicted_rate
from policies.goodput import StepCost, leviathan_tokens
from tests.tiny_models import llama, perturbed


class Recording:
    """Wraps a model: records the tokens fed and the cache length before each forward."""

    def __init__(self, model):
        self.model, self.calls = model, []

    def __getattr__(self, name):
        return getattr(self.model, name)

    def forward(self, input_ids, past_key_values=None, logits_to_keep=0, **kwargs):
        before = past_key_values.get_seq_length() if past_key_values is not None else 0
        self.calls.append((input_ids.shape[1], before, logits_to_keep))
        return self.model(input_ids=input_ids, past_key_values=past_key_values,
                          logits_to_keep=logits_to_keep, **kwargs)

    __call__ = forward


def test_measure_times_one_draft_token_and_k_plus_one_target_tokens_on_the_same_context():
    target = llama(seed=0)
    draft = Recording(perturbed(target, 0.05))
    recorded_target = Recording(target)
    measured = cost_model.measure(recorded_target, draft, list(range(1, 21)), max_k=3, repeats=4)
    assert measured.context == 20 and measured.device == "cpu"
    costs = measured.cost
    assert len(costs.verify) == 4 and costs.draft_per_token > 0 and all(v > 0 for v in costs.verify)
    # First the context (prefill), then the timed passes, each on the 20 cached tokens: every pass is
    # cropped back, so the cache never grows between them.
    assert draft.calls[0][:2] == (20, 0)
    assert {c[:2] for c in draft.calls[1:]} == {(1, 20)}
    per_k = {}
    for fed, before, keep in recorded_target.calls:
        if before:
            assert before == 20 and keep == fed
            per_k[fed - 1] = per_k.get(fed - 1, 0) + 1
    assert per_k == {0: 6, 1: 6, 2: 6, 3: 6}  # repeats + two warm-up passes per K


def test_prediction_is_tokens_over_step_seconds_for_the_lookaheads_run():
    costs = StepCost(0.001, (0.010, 0.012, 0.015))
    assert costs.ratio == pytest.approx(0.1) and costs.verify_ratio(2) == pytest.approx(1.5)
    assert costs.step_seconds(2) == pytest.approx(0.017)
    a = 0.8
    # Two steps at K=2 and the last one shortened to K=1: expected tokens over expected seconds.
    expected = (2 * leviathan_tokens(a, 2) + leviathan_tokens(a, 1)) / (2 * 0.017 + 0.013)
    assert predicted_rate(a, [2, 2, 1], costs) == pytest.approx(expected)
    # Plain decoding: one token per target step.
    assert predicted_rate(0.0, [0, 0], costs) == pytest.approx(100.0)
    # Verification costing more than a target step lowers the prediction below Leviathan's.
    leviathan = StepCost(0.001, (0.010, 0.010, 0.010))
    assert predicted_rate(a, [2], costs) < predicted_rate(a, [2], leviathan)


def test_measure_needs_a_context():
    target = llama(seed=0)
    with pytest.raises(ValueError, match="context_ids"):
        cost_model.measure(target, target, [], max_k=1)


def test_typical_context_is_a_prompt_plus_half_the_new_tokens():
    prompts = [[1, 2, 3, 4], [5, 6]]
    assert cost_model.typical_context(prompts, 4) == [1, 2, 3, 4, 5]  # 3 + 4 / 2
    assert len(cost_model.typical_context(prompts, 40)) == 23  # tokens repeat to reach the length
    assert cost_model.typical_context(prompts, 40, limit=7) == [1, 2, 3, 4, 5, 6, 1]
    with pytest.raises(ValueError, match="prompts"):
        cost_model.typical_context([[]], 4)
