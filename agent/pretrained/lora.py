"""Low-rank adapters (LoRA, Hu et al. 2021, arXiv 2106.09685) on a transformers model, in plain torch.

A linear layer ``y = W x`` becomes ``y = W x + (alpha / rank) * B (A x)`` with ``A`` (rank x in) and ``B``
(out x rank) trained and ``W`` frozen; ``B`` starts at zero, so a fresh adapter changes nothing. The saved
form is PEFT's (``adapter_config.json`` and ``adapter_model.safetensors`` with its tensor names), so
``peft.PeftModel.from_pretrained(target, folder)`` loads it where peft is installed; ``load`` here needs
nothing but torch. llama.cpp applies the same sum at run time (``--lora``; agent/pretrained/lora_gguf.py).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

WEIGHTS = "adapter_model.safetensors"
CONFIG = "adapter_config.json"
# The value, output and MLP projections: enough to change what the model writes (~2 M parameters at rank 8 on
# SmolLM2-135M). Query and key may be adapted too (the GGUF export permutes their rows for llama.cpp's rotary
# layout); they are left out to keep training cheap.
TARGETS = ("v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class LoraSpec:
    """rank: r; alpha: the scale numerator (the update is scaled by alpha / rank); targets: names of the
    linear layers adapted (the last part of their module path)."""

    rank: int = 8
    alpha: float = 16.0
    targets: tuple[str, ...] = TARGETS

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", tuple(self.targets))
        if type(self.rank) is not int or self.rank < 1:
            raise ValueError(f"LoraSpec.rank: must be a positive integer, got {self.rank!r}")
        if not self.alpha > 0:
            raise ValueError(f"LoraSpec.alpha: must be > 0, got {self.alpha!r}")
        if not self.targets:
            raise ValueError("LoraSpec.targets: name at least one layer")

    @property
    def scale(self) -> float:
        return self.alpha / self.rank


class LoraLinear(nn.Module):
    """A frozen linear layer plus its low-rank update."""

    def __init__(self, base: nn.Linear, rank: int, scale: float):
        super().__init__()
        self.base = base
        self.scale = scale
        self.enabled = True  # False: the base layer alone (target v1), as ``disabled`` sets it
        self.lora_A = nn.Parameter(torch.empty(rank, base.in_features, dtype=base.weight.dtype))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank, dtype=base.weight.dtype))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))  # PEFT's initialisation of A

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.enabled:
            return self.base(x)
        return self.base(x) + (x @ self.lora_A.T @ self.lora_B.T) * self.scale

    def delta(self) -> torch.Tensor:
        """The update to the base weight, (out x in)."""
        return (self.lora_B @ self.lora_A) * self.scale


def attach(model: nn.Module, spec: LoraSpec = LoraSpec()) -> dict[str, LoraLinear]:
    """Wrap every targeted linear layer of ``model`` (in place); freeze everything else. Name -> layer, the
    name being the linear layer's module path."""
    for p in model.parameters():
        p.requires_grad_(False)
    found: dict[str, LoraLinear] = {}
    for name, module in list(model.named_modules()):
        if name.rsplit(".", 1)[-1] in spec.targets and isinstance(module, nn.Linear):
            parent_name, _, child = name.rpartition(".")
            layer = LoraLinear(module, spec.rank, spec.scale)
            setattr(model.get_submodule(parent_name), child, layer)
            found[name] = layer
    if not found:
        raise ValueError(f"no linear layer named {', '.join(spec.targets)} in {type(model).__name__}")
    return found


def layers(model: nn.Module) -> dict[str, LoraLinear]:
    """The adapted layers of ``model`` by module path."""
    return {name: m for name, m in model.named_modules() if isinstance(m, LoraLinear)}


@contextmanager
def disabled(model: nn.Module) -> Iterator[nn.Module]:
    """``model`` without its adapters inside the block (the base model: target v1), as it was after."""
    found = list(layers(model).values())
    before = [layer.enabled for layer in found]
    for layer in found:
        layer.enabled = False
    try:
        yield model
    finally:
        for layer, was in zip(found, before):
            layer.enabled = was


def merge(model: nn.Module) -> nn.Module:
    """Fold each update into its base weight and unwrap the layer (in place): a plain model of v2."""
    with torch.no_grad():
        for name, layer in layers(model).items():
            layer.base.weight += layer.delta().to(layer.base.weight.dtype)
            parent_name, _, child = name.rpartition(".")
            setattr(model.get_submodule(parent_name), child, layer.base)
    return model


def _peft_name(name: str, which: str) -> str:
    return f"base_model.model.{name}.lora_{which}.weight"


def save(model: nn.Module, folder: Path, spec: LoraSpec, base: str = "", dtype: torch.dtype = torch.float16) -> Path:
    """Write the adapter of ``model`` to ``folder`` in PEFT's layout (weights in ``dtype``)."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    tensors = {}
    for name, layer in layers(model).items():
        tensors[_peft_name(name, "A")] = layer.lora_A.detach().to(dtype).contiguous()
        tensors[_peft_name(name, "B")] = layer.lora_B.detach().to(dtype).contiguous()
    save_file(tensors, str(folder / WEIGHTS), metadata={"format": "pt"})
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": spec.rank, "lora_alpha": spec.alpha,
              "target_modules": list(spec.targets), "lora_dropout": 0.0, "bias": "none",
              "fan_in_fan_out": False, "base_model_name_or_path": base}
    (folder / CONFIG).write_text(json.dumps(config, indent=2) + "\n")
    return folder


def read_spec(folder: Path) -> LoraSpec:
    config = json.loads((folder / CONFIG).read_text())
    return LoraSpec(rank=int(config["r"]), alpha=float(config["lora_alpha"]), targets=tuple(config["target_modules"]))


def pairs(folder: Path) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Linear layer path -> (A, B) of a saved adapter."""
    from safetensors.torch import load_file

    tensors = load_file(str(folder / WEIGHTS))
    out = {}
    for key in tensors:
        if key.endswith(".lora_A.weight"):
            name = key[len("base_model.model."):-len(".lora_A.weight")]
            out[name] = (tensors[key], tensors[_peft_name(name, "B")])
    return out


def load(model: nn.Module, folder: Path) -> nn.Module:
    """Attach the adapter saved in ``folder`` to ``model`` (in place); every saved layer must be found."""
    spec = read_spec(folder)
    attached = attach(model, spec)
    saved = pairs(folder)
    missing = sorted(set(saved) ^ set(attached))
    if missing:
        raise ValueError(f"{folder}: the adapter and the model disagree on layer {missing[0]}")
    with torch.no_grad():
        for name, (a, b) in saved.items():
            attached[name].lora_A.copy_(a)
            attached[name].lora_B.copy_(b)
    return model


def spec_dict(spec: LoraSpec) -> dict:
    return {**asdict(spec), "targets": list(spec.targets)}
