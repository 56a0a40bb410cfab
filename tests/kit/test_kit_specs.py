import dataclasses

import pytest

from agent.kit.specs import FULL, SPECS, TINY, DataSpec, KitSpec, ModelShape, StageSpec, get_spec


def test_named_specs():
    assert set(SPECS) == {"tiny", "full"}
    assert get_spec("tiny") is TINY
    with pytest.raises(ValueError, match="size: expected one of"):
        get_spec("huge")


@pytest.mark.parametrize("spec", [TINY, FULL])
def test_draft_is_much_smaller_than_target(spec):
    def params(shape):
        return shape.layers * (4 * shape.hidden ** 2 + 3 * shape.hidden * shape.intermediate)
    assert params(spec.draft) * 5 < params(spec.target)


def test_validation_names_the_field():
    with pytest.raises(ValueError, match="ModelShape.heads"):
        ModelShape(hidden=96, layers=1, heads=5, intermediate=64)
    with pytest.raises(ValueError, match="StageSpec.mix: unknown source 'poetry'"):
        StageSpec(steps=1, lr=1e-3, batch_size=1, mix=(("poetry", 1.0),))
    with pytest.raises(ValueError, match="StageSpec.warmup"):
        StageSpec(steps=5, lr=1e-3, batch_size=1, mix=(("code", 1.0),), warmup=5)
    with pytest.raises(ValueError, match="DataSpec.prompt_min_bytes"):
        dataclasses.replace(TINY.data, prompt_min_bytes=500)
    with pytest.raises(ValueError, match="KitSpec.seq_len"):
        dataclasses.replace(TINY, seq_len=100)
    with pytest.raises(ValueError, match="KitSpec.draft"):
        dataclasses.replace(TINY, draft=TINY.target)
    with pytest.raises(ValueError, match="KitSpec.precision"):
        dataclasses.replace(TINY, precision="int4")


def test_fingerprint_follows_every_weight_affecting_field():
    assert TINY.fingerprint() == dataclasses.replace(TINY).fingerprint()
    assert TINY.fingerprint() != dataclasses.replace(TINY, seed=1).fingerprint()
    changed = dataclasses.replace(TINY.target_v2, lr=1e-4)
    assert TINY.fingerprint() != dataclasses.replace(TINY, target_v2=changed).fingerprint()
    assert isinstance(TINY, KitSpec) and isinstance(TINY.data, DataSpec)
