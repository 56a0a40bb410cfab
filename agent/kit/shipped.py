"""The kit's trained weights as shipped in the repository, so a first run decodes in a minute instead of
training for 6-16 minutes on 2 CPU cores.

``agent/kit/weights/<size>/`` holds one float16 safetensors file per model (target-v1, draft, target-v2; the
tied output matrix is stored once) and ``manifest.json``: the kit spec's fingerprint the weights belong to,
per file its sha256 and size, the trained model's version and the version the shipped weights load as (the
float16 rounding changes the weights, so the version differs), the software that trained them, the command
that rebuilt them, and the draft's acceptance per target and domain measured on the trained and on the
shipped weights (``specwatch models ship`` writes all of it from a kit built by ``specwatch models build``).

Installing (``install_model``) writes the same ``save_pretrained`` folder a trained stage would, in float32,
after checking the file's sha256; the corpus stage still runs (deterministic, seconds), so prompts and the
training data for re-distillation are there as after a full build.
"""

from __future__ import annotations

import platform
from pathlib import Path

import torch
import transformers
from safetensors.torch import load_file, save_file

from agent.kit import layout
from agent.kit.specs import KitSpec
from specwatch_core.files import sha256_of

WEIGHTS = Path(__file__).parent / "weights"
TIED = "lm_head.weight"  # the kit's models tie it to the input embedding: stored once


class ShippedWeightsError(RuntimeError):
    """Shipped weights that do not match their manifest (a damaged or hand-edited file)."""


def folder(size: str) -> Path:
    return WEIGHTS / size


def manifest_for(spec: KitSpec, where: Path | None = None) -> dict | None:
    """The shipped manifest for this spec (in ``where``, else the repository's folder for its size), or None
    when nothing is shipped for it (another spec, or none); ``"folder"`` is added, where the files are."""
    where = where or folder(spec.name)
    manifest = layout.read_manifest(where)
    if manifest is None or manifest.get("spec_hash") != spec.fingerprint():
        return None
    return {**manifest, "folder": str(where)}


def write_model(model: torch.nn.Module, path: Path) -> dict:
    """``model``'s weights as float16 safetensors at ``path``; its manifest entry (file, sha256, bytes)."""
    state = {name: t.detach().to("cpu", torch.float16).contiguous() for name, t in model.state_dict().items()
             if name != TIED}
    save_file(state, str(path), metadata={"format": "pt", "tied": TIED})
    return {"file": path.name, "sha256": sha256_of(path), "bytes": path.stat().st_size}


def read_model(model: torch.nn.Module, entry: dict, where: Path) -> torch.nn.Module:
    """Load the shipped file of ``entry`` (in ``where``) into ``model`` (freshly built with the kit's shape)
    as float32, after checking its sha256."""
    path = Path(where) / entry["file"]
    if not path.exists():
        raise ShippedWeightsError(f"{path}: missing (the repository checkout is incomplete?)")
    found = sha256_of(path)
    if found != entry["sha256"]:
        raise ShippedWeightsError(f"{path}: sha256 {found[:12]}... is not the manifest's {entry['sha256'][:12]}...; "
                                  f"restore it from git, or train the kit with `specwatch models build`")
    state = {name: t.to(torch.float32) for name, t in load_file(str(path)).items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or set(missing) - {TIED}:
        raise ShippedWeightsError(f"{path}: does not fit the kit's model (missing {sorted(missing)[:3]}, "
                                  f"unexpected {sorted(unexpected)[:3]})")
    model.tie_weights()
    return model.eval()


def environment() -> dict:
    return {"python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__}
