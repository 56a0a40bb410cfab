"""Load a built kit (or any local HF causal-LM checkpoint) for decoding."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from transformers import AutoModelForCausalLM
from transformers.utils import logging as hf_logging

from agent.decoding.devices import resolve_device, resolve_dtype
from agent.kit import layout, tokenizer


class KitNotBuiltError(FileNotFoundError):
    """The kit is missing or unfinished; the message names the command that builds it."""


@dataclass
class Kit:
    """The three models of a kit, their versions (weight hashes) and held-out prompts per domain.

    ``encode`` turns a prompt into token ids: the kit's byte tokenizer here; a pretrained model seen as a kit
    (agent/pretrained/as_kit.py) brings its own tokenizer, its prompts already in its chat template."""

    root: Path
    target_v1: torch.nn.Module
    target_v2: torch.nn.Module
    draft: torch.nn.Module
    versions: dict[str, str]  # "target-v1", "draft", "target-v2" -> weights_version
    prompts: dict[str, list[str]]
    manifest: dict = field(repr=False)
    encode: Callable[[str], list[int]] = field(default=tokenizer.encode, repr=False)

    @property
    def domains(self) -> list[str]:
        return list(self.prompts)

    def prompt_ids(self, domain: str) -> list[list[int]]:
        return [self.encode(text) for text in self.prompts[domain]]

    def heldout(self) -> dict[str, str]:
        """Held-out text per domain (for loss)."""
        return layout.load_heldout(self.root)


def load_model(path: str | Path, device: str | torch.device = "auto",
               dtype: str | torch.dtype | None = None) -> torch.nn.Module:
    """A local causal-LM checkpoint (save_pretrained folder), in eval mode."""
    path = Path(path)
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"{path}: not a model folder (no config.json)")
    dev = resolve_device(device)
    with quiet_progress():
        model = AutoModelForCausalLM.from_pretrained(path, dtype=resolve_dtype(dtype, dev))
    return model.to(dev).eval()


@contextmanager
def quiet_progress():
    """Hide transformers' per-shard progress bars (they would break the CLI's own progress display)."""
    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


def load_kit(size: str = "full", device: str | torch.device = "auto", dtype: str | torch.dtype | None = None,
             home: str | Path | None = None) -> Kit:
    """Load the kit built by ``specwatch models build --size <size>``."""
    root = layout.kit_dir(size, home)
    manifest = layout.read_manifest(root)
    if manifest is None:
        raise KitNotBuiltError(f"no {size!r} model kit in {root}; "
                               f"build it with: specwatch models build --size {size}")
    if not manifest.get("complete"):
        done = ", ".join(manifest.get("stages", {})) or "nothing"
        raise KitNotBuiltError(f"the {size!r} model kit in {root} is unfinished (done: {done}); "
                               f"finish it with: specwatch models build --size {size}")
    models = {name: load_model(root / name, device, dtype) for name in layout.MODELS}
    return Kit(root=root, target_v1=models["target-v1"], target_v2=models["target-v2"], draft=models["draft"],
               versions=dict(manifest["versions"]), prompts=layout.load_prompts(root), manifest=manifest)
