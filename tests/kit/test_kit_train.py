import numpy as np
import pytest
import torch

from agent.kit.build import new_model
from agent.kit.specs import ModelShape
from agent.kit.train import WindowSampler, lr_at, train

SOURCES = {"a": np.arange(3, 259, dtype=np.uint16).repeat(4), "b": np.full(500, 100, dtype=np.uint16)}
MIX = (("a", 0.5), ("b", 0.5))


def sampler(seed=0):
    return WindowSampler(SOURCES, MIX, batch_size=3, seq_len=16, seed=seed)


def test_batches_depend_only_on_seed_and_step():
    s = sampler()
    assert s(5).shape == (3, 17)
    assert torch.equal(s(5), sampler()(5))
    assert not torch.equal(s(5), s(6))
    assert not torch.equal(s(5), sampler(seed=1)(5))


def test_sampler_rejects_missing_or_short_sources():
    with pytest.raises(ValueError, match="no training text for source 'c'"):
        WindowSampler(SOURCES, (("c", 1.0),), 1, 16, 0)
    with pytest.raises(ValueError, match="shorter than one window"):
        WindowSampler(SOURCES, MIX, 1, 600, 0)


def test_lr_schedule():
    assert lr_at(0, 100, 1.0, 10) == pytest.approx(0.1)
    assert lr_at(10, 100, 1.0, 10) == pytest.approx(1.0)
    assert lr_at(99, 100, 1.0, 10) == pytest.approx(0.1, abs=1e-3)
    assert lr_at(55, 100, 1.0, 10) < lr_at(30, 100, 1.0, 10)


def small():
    return new_model(ModelShape(hidden=16, layers=1, heads=2, intermediate=32), 32, seed=0)


def test_training_lowers_the_loss():
    model = small()
    first = train(model, sampler(), steps=1, lr=1e-2)
    model = small()
    last = train(model, sampler(), steps=40, lr=1e-2)
    assert last.loss < first.loss - 0.5


def test_interrupted_training_resumes_exactly(tmp_path):
    straight = small()
    train(straight, sampler(), steps=10, lr=1e-2)

    class Stop(Exception):
        pass

    def stop_at_6(done, total, loss):
        if done == 6:
            raise Stop

    ckpt = tmp_path / "stage.ckpt"
    resumed = small()
    with pytest.raises(Stop):
        train(resumed, sampler(), steps=10, lr=1e-2, checkpoint=ckpt, checkpoint_every=4, progress=stop_at_6)
    assert torch.load(ckpt, weights_only=True)["step"] == 6
    resumed = small()
    result = train(resumed, sampler(), steps=10, lr=1e-2, checkpoint=ckpt, checkpoint_every=4)
    assert result.resumed_from == 6
    for name, tensor in straight.state_dict().items():
        assert torch.equal(tensor, resumed.state_dict()[name]), name


def test_distillation_moves_the_student_towards_the_teacher():
    teacher = small()
    train(teacher, sampler(), steps=30, lr=1e-2)
    student = new_model(ModelShape(hidden=8, layers=1, heads=2, intermediate=16), 32, seed=1)
    first = train(student, sampler(seed=2), steps=1, lr=1e-2, teacher=teacher).loss
    later = train(student, sampler(seed=2), steps=40, lr=1e-2, teacher=teacher).loss
    assert later < first / 2
