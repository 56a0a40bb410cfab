import pytest
import torch

from agent.decoding.sampling import SamplingParams, overlap, probabilities, residual

LOGITS = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05], dtype=torch.float64))


def test_greedy_params_give_the_plain_softmax():
    assert torch.allclose(probabilities(LOGITS, SamplingParams()), torch.exp(LOGITS))


def test_temperature_top_k_top_p():
    assert torch.allclose(probabilities(LOGITS, SamplingParams(temperature=1.0, top_k=2)),
                          torch.tensor([0.625, 0.375, 0, 0], dtype=torch.float64))
    # 0.5 + 0.3 reaches 0.79: the two most likely tokens stay, renormalised.
    assert torch.allclose(probabilities(LOGITS, SamplingParams(temperature=1.0, top_p=0.79)),
                          torch.tensor([0.625, 0.375, 0, 0], dtype=torch.float64))
    # 0.81 needs a third token.
    assert probabilities(LOGITS, SamplingParams(temperature=1.0, top_p=0.81))[2] > 0
    # top_p below the first token's mass keeps that token alone.
    assert probabilities(LOGITS, SamplingParams(temperature=1.0, top_p=0.1)).tolist() == [1, 0, 0, 0]
    hot = probabilities(LOGITS, SamplingParams(temperature=2.0))
    assert hot[0] < 0.5 and hot[3] > 0.05 and hot.sum() == pytest.approx(1)


def test_residual_and_overlap():
    p = torch.tensor([0.5, 0.3, 0.2])
    q = torch.tensor([0.2, 0.6, 0.2])
    assert torch.allclose(residual(p, q), torch.tensor([1.0, 0.0, 0.0]))
    assert float(overlap(p, q)) == pytest.approx(0.7)
    assert torch.equal(residual(p, p), p)  # never rejected; stays a distribution


@pytest.mark.parametrize("kwargs,field", [
    (dict(temperature=-0.1), "temperature"), (dict(top_k=-1), "top_k"), (dict(top_p=0.0), "top_p"),
    (dict(top_p=1.5), "top_p")])
def test_bad_params_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        SamplingParams(**kwargs)
