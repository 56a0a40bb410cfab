"""MICRO: a smaller-than-tiny kit spec for tests that build several times (determinism, resume)."""

import dataclasses

from agent.kit.specs import TINY, StageSpec

MICRO = dataclasses.replace(
    TINY, name="micro",
    data=dataclasses.replace(TINY.data, code_bytes=40_000, prose_bytes=20_000, logs_bytes=20_000,
                             heldout_bytes=12_000, prompts_per_domain=2),
    target_v1=StageSpec(steps=10, lr=3e-3, batch_size=4, mix=TINY.target_v1.mix, warmup=2),
    draft_distill=StageSpec(steps=8, lr=3e-3, batch_size=4, mix=TINY.draft_distill.mix, warmup=2),
    target_v2=StageSpec(steps=6, lr=2e-3, batch_size=4, mix=TINY.target_v2.mix, warmup=1),
    checkpoint_every=4,
)
