"""Target v2's adapter as shipped in the repository: ``agent/pretrained/weights/<name>-lora-v2/`` holds the
PEFT folder (float16, ~4 MB) and ``manifest.json`` (sha256, version, how it was trained, the base version it
adapts). ``install`` copies it under a prepared model's folder and writes its GGUF; ``ship`` writes a freshly
trained one into the repository."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable

from agent.kit.layout import read_json
from agent.pretrained import layout, lora
from agent.pretrained.lora_gguf import export_adapter
from agent.pretrained.shipped import WEIGHTS
from specwatch_core.files import sha256_of

ADAPTER = "lora-v2"  # the PEFT folder under the prepared model's root
FILES = (lora.WEIGHTS, lora.CONFIG, "training.json")
VERSION_DIGITS = 12


def folder(name: str) -> Path:
    return WEIGHTS / f"{name}-lora-v2"


def manifest(name: str) -> dict | None:
    path = folder(name) / "manifest.json"
    return read_json(path) if path.exists() else None


def ship(name: str, trained: Path, base_version: str) -> dict:
    """Copy the adapter trained in ``trained`` into the repository with its manifest."""
    where = folder(name)
    where.mkdir(parents=True, exist_ok=True)
    for f in FILES:
        shutil.copyfile(trained / f, where / f)
    digest = sha256_of(where / lora.WEIGHTS)
    m = {"model": name, "target_version": base_version, "version": digest[:12], "sha256": digest,
         "bytes": (where / lora.WEIGHTS).stat().st_size,
         "training": json.loads((where / "training.json").read_text()),
         "rebuild": f"specwatch models pretrained --name {name} --lora-v2 --ship"}
    (where / "manifest.json").write_text(json.dumps(m, indent=2) + "\n")
    return m


def install(name: str, root: Path, target_gguf: Path, base_version: str, say: Callable[[str], None]) -> dict | None:
    """Install the shipped adapter of ``name`` under ``root`` (PEFT folder and GGUF); the manifest entry
    (None: none is shipped, or it was trained on another base)."""
    m = manifest(name)
    if m is None or m["target_version"] != base_version:
        return None
    out = root / ADAPTER
    if sha256_of(folder(name) / lora.WEIGHTS) != m["sha256"]:
        raise OSError(f"{folder(name) / lora.WEIGHTS}: sha256 differs from its manifest (a partial checkout?)")
    installed = out / lora.WEIGHTS
    if not installed.is_file() or sha256_of(installed) != m["sha256"]:
        say(f"{name}: installing target v2's shipped adapter {m['version']} ({m['bytes'] / 1e6:.1f} MB)")
        out.mkdir(parents=True, exist_ok=True)
        for f in FILES:
            shutil.copyfile(folder(name) / f, out / f)
    return install_gguf(root, target_gguf, name)


def install_gguf(root: Path, target_gguf: Path, name: str) -> dict:
    """Export the adapter in ``root/lora-v2`` as GGUF beside the target (unless that file is there) and record
    both in the manifest; the manifest entry."""
    folder_ = root / ADAPTER
    version = sha256_of(folder_ / lora.WEIGHTS)[:VERSION_DIGITS]
    out = layout.gguf_path(root, "lora-v2", version, "f16")
    entry = {"version": version, "adapter": ADAPTER, "gguf": str(out.relative_to(root))}
    manifest_ = layout.read_manifest(root)
    if manifest_.get("target_v2") == entry and out.is_file():
        return entry
    export_adapter(folder_, out, target_gguf, name=f"specwatch-{name}-lora-v2")
    for stale in root.glob("gguf/lora-v2-*.gguf"):
        if stale != out:
            stale.unlink()
    layout.write_manifest(root, {**manifest_, "target_v2": entry})
    return entry
