"""The distilled draft as shipped in the repository: ``agent/pretrained/weights/<name>-draft/`` holds its
config, float16 safetensors (tied output stored once) and ``manifest.json`` (sha256, version, shape, how it
was trained, its acceptance per domain on held-out prompts). ``install_draft`` turns it into a transformers
checkpoint and a GGUF carrying the target's tokenizer under the prepared model's folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable

from agent.kit.layout import read_json
from agent.pretrained import layout

WEIGHTS = Path(__file__).parent / "weights"


def folder(name: str) -> Path:
    return WEIGHTS / f"{name}-draft"


def manifest(name: str) -> dict | None:
    path = folder(name) / "manifest.json"
    return read_json(path) if path.exists() else None


def install_draft(name: str, root: Path, target_gguf: Path, say: Callable[[str], None],
                  tokenizer_dir: Path | None = None) -> dict | None:
    """Install the shipped draft of ``name`` into ``root``; {"version", "gguf"} (None: none is shipped).
    ``tokenizer_dir``: a folder whose tokenizer files are copied beside the draft's weights (the target's)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from agent.kit.gguf import export_model
    from agent.kit.shipped import read_model

    m = manifest(name)
    if m is None:
        say(f"{name}: no draft is shipped for it (build one with specwatch models pretrained --distill)")
        return None
    version = m["version"]
    out, gguf = root / "draft", layout.gguf_path(root, "draft", version, "f16")
    done = root / "draft" / "specwatch-draft.json"
    if not (done.is_file() and json.loads(done.read_text()).get("version") == version and gguf.is_file()):
        say(f"{name}: installing the shipped draft {version} ({m['parameters'] / 1e6:.1f} M parameters)")
        config = AutoConfig.from_pretrained(folder(name))
        model = read_model(AutoModelForCausalLM.from_config(config), m["weights"], folder(name))
        tmp = out.with_name(".draft.tmp")
        save_draft(model, tmp, tokenizer_dir)
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
        export_model(out, gguf, dtype="f16", name=f"specwatch-{name}-draft", tokenizer_from=target_gguf)
        done.write_text(json.dumps({"version": version}) + "\n")
    return {"version": version, "gguf": str(gguf.relative_to(root))}


def save_draft(model, out: Path, tokenizer_dir: Path | None = None) -> Path:
    """``model`` as a transformers checkpoint in ``out`` (replaced), with the tokenizer files of
    ``tokenizer_dir`` (the target's or another draft folder's) beside its weights."""
    from agent.kit.load import quiet_progress

    shutil.rmtree(out, ignore_errors=True)
    with quiet_progress():
        model.save_pretrained(out)
    for f in (tokenizer_dir.glob("*") if tokenizer_dir is not None else ()):
        if f.name.startswith(("tokenizer", "chat_template", "special_tokens")):
            shutil.copy(f, out / f.name)
    return out
