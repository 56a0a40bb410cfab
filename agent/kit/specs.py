"""Kit sizes as frozen, validated dataclasses: model shapes, data budgets and training stages.

``full`` is the kit benchmarks run on (budget 8 minutes on 2 CPU cores; measured 6 minutes with bf16
autocast on AMX, 12.5-16 minutes in float32 on 2-core AMD EPYCs); ``tiny`` is for tests (budget 30 seconds;
measured about 5 seconds of training). Both train a Llama-style byte-level target, a much cheaper draft
distilled from it, and target v2 (see :mod:`agent.workload.sources.service_logs` for the story behind v2's data).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

from agent.kit.corpora import SOURCES


def _positive(owner: str, **values: float) -> None:
    for name, value in values.items():
        if not value > 0:
            raise ValueError(f"{owner}.{name}: must be > 0, got {value!r}")


@dataclass(frozen=True)
class ModelShape:
    """A LlamaForCausalLM's size; the vocabulary is always the byte tokenizer's."""

    hidden: int
    layers: int
    heads: int
    intermediate: int

    def __post_init__(self):
        _positive("ModelShape", hidden=self.hidden, layers=self.layers, heads=self.heads,
                  intermediate=self.intermediate)
        if self.hidden % self.heads or (self.hidden // self.heads) % 2:
            raise ValueError(f"ModelShape.heads: hidden={self.hidden} must split into {self.heads} heads "
                             "of even size (rotary embeddings rotate pairs)")


@dataclass(frozen=True)
class StageSpec:
    """One training stage: steps of ``batch_size`` windows drawn from sources by ``mix`` weights."""

    steps: int
    lr: float
    batch_size: int
    mix: tuple[tuple[str, float], ...]
    warmup: int = 0

    def __post_init__(self):
        _positive("StageSpec", steps=self.steps, lr=self.lr, batch_size=self.batch_size)
        if not 0 <= self.warmup < self.steps:
            raise ValueError(f"StageSpec.warmup: must be in 0..steps-1, got {self.warmup}")
        names = [name for name, _ in self.mix]
        unknown = sorted(set(names) - set(SOURCES))
        if unknown:
            raise ValueError(f"StageSpec.mix: unknown source {unknown[0]!r}; expected {', '.join(SOURCES)}")
        if len(set(names)) != len(names) or not self.mix:
            raise ValueError("StageSpec.mix: needs at least one source, each at most once")
        if any(not w > 0 for _, w in self.mix):
            raise ValueError("StageSpec.mix: weights must be > 0")


@dataclass(frozen=True)
class DataSpec:
    """Byte budgets of training text per source and of held-out text per domain; prompt shape."""

    code_bytes: int
    prose_bytes: int
    logs_bytes: int
    heldout_bytes: int
    prompts_per_domain: int
    prompt_min_bytes: int
    prompt_max_bytes: int

    def __post_init__(self):
        _positive("DataSpec", **asdict(self))
        if self.prompt_min_bytes > self.prompt_max_bytes:
            raise ValueError("DataSpec.prompt_min_bytes: must be <= prompt_max_bytes")


@dataclass(frozen=True)
class KitSpec:
    """Everything that determines a kit's weights; its hash is recorded in the manifest."""

    name: str
    target: ModelShape
    draft: ModelShape
    data: DataSpec
    seq_len: int  # training window; also the models' max_position_embeddings
    target_v1: StageSpec
    draft_distill: StageSpec
    target_v2: StageSpec
    seed: int = 0
    precision: str = "float32"  # or "bfloat16" (autocast), or "auto": bf16 where the CPU has it natively
    threads: int = 0  # torch intra-op threads while training; 0 = torch's default
    checkpoint_every: int = 50
    eval_new_tokens: int = 64

    def __post_init__(self):
        if not self.name.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"KitSpec.name: letters, digits, - and _ only, got {self.name!r}")
        if self.threads < 0:
            raise ValueError(f"KitSpec.threads: must be >= 0, got {self.threads}")
        _positive("KitSpec", seq_len=self.seq_len, checkpoint_every=self.checkpoint_every,
                  eval_new_tokens=self.eval_new_tokens)
        if self.precision not in ("auto", "float32", "bfloat16"):
            raise ValueError(f"KitSpec.precision: expected auto, float32 or bfloat16, got {self.precision!r}")
        if self.data.prompt_max_bytes + self.eval_new_tokens > self.seq_len:
            raise ValueError(f"KitSpec.seq_len: {self.seq_len} is shorter than the longest prompt "
                             f"({self.data.prompt_max_bytes}) plus eval_new_tokens ({self.eval_new_tokens})")
        if self.draft.hidden * self.draft.layers >= self.target.hidden * self.target.layers:
            raise ValueError("KitSpec.draft: must be smaller than the target")

    def to_dict(self) -> dict:
        return asdict(self)

    def fingerprint(self) -> str:
        """Hash of every field that affects the weights."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:12]


_V1_MIX = (("code", 0.4), ("prose", 0.3), ("logs", 0.3))
# v2: the services now log in schema 2, and the fine-tune replays code and prose so they are kept.
_V2_MIX = (("code", 0.25), ("prose", 0.15), ("logs-v2", 0.6))

TINY = KitSpec(
    name="tiny",
    target=ModelShape(hidden=64, layers=2, heads=2, intermediate=128),
    draft=ModelShape(hidden=32, layers=1, heads=2, intermediate=64),
    data=DataSpec(code_bytes=120_000, prose_bytes=60_000, logs_bytes=60_000, heldout_bytes=30_000,
                  prompts_per_domain=4, prompt_min_bytes=64, prompt_max_bytes=128),
    seq_len=160,
    target_v1=StageSpec(steps=150, lr=3e-3, batch_size=4, mix=_V1_MIX, warmup=10),
    draft_distill=StageSpec(steps=100, lr=3e-3, batch_size=4, mix=_V1_MIX, warmup=5),
    target_v2=StageSpec(steps=60, lr=2e-3, batch_size=4, mix=_V2_MIX, warmup=5),
    threads=1,
    checkpoint_every=50,
    eval_new_tokens=24,
)

# Many small steps: on this budget (about 1.5M training bytes) batches of 4 windows learn far more per
# byte than batches of 16. The target is deep enough that its single-token forward costs ~4x the draft's.
FULL = KitSpec(
    name="full",
    target=ModelShape(hidden=256, layers=6, heads=4, intermediate=768),
    draft=ModelShape(hidden=128, layers=1, heads=2, intermediate=384),
    data=DataSpec(code_bytes=2_000_000, prose_bytes=1_000_000, logs_bytes=1_000_000, heldout_bytes=200_000,
                  prompts_per_domain=32, prompt_min_bytes=160, prompt_max_bytes=256),
    seq_len=320,
    target_v1=StageSpec(steps=1200, lr=2e-3, batch_size=4, mix=_V1_MIX, warmup=50),
    draft_distill=StageSpec(steps=600, lr=3e-3, batch_size=4, mix=_V1_MIX, warmup=30),
    target_v2=StageSpec(steps=300, lr=1e-3, batch_size=4, mix=_V2_MIX, warmup=15),
    precision="auto",
    checkpoint_every=200,
    eval_new_tokens=64,
)

SPECS = {spec.name: spec for spec in (TINY, FULL)}


def get_spec(name: str) -> KitSpec:
    try:
        return SPECS[name]
    except KeyError:
        raise ValueError(f"size: expected one of {', '.join(SPECS)}, got {name!r}") from None
