"""Where a prepared pretrained model lives: ``home()/pretrained/<name>/``.

```
pretrained/<name>/manifest.json          model, package, versions, files, the draft's figures
pretrained/<name>/gguf/target-<version>-<quant>.gguf   the model as shipped in its package (llama.cpp)
pretrained/<name>/gguf/draft-<version>-f16.gguf        the distilled draft with the target's tokenizer
pretrained/<name>/hf/                     transformers checkpoint of the target (dequantized, float32)
pretrained/<name>/draft/                  transformers checkpoint of the draft
pretrained/<name>/data/                   teacher streams the draft is distilled on
```
Versions are the first 12 hex digits of the sha256 of the GGUF file (the proxy reads the same hash off the
file llama.cpp serves) and, for the transformers checkpoints, of their weights (agent/decoding/versions.py).
"""

from __future__ import annotations

from pathlib import Path

from agent.kit.layout import read_json, write_json
from specwatch_core import settings

MANIFEST = "manifest.json"


def root(name: str, home: str | Path | None = None) -> Path:
    return Path(home if home is not None else settings.home()) / "pretrained" / name


def read_manifest(folder: Path) -> dict:
    path = folder / MANIFEST
    return read_json(path) if path.exists() else {}


def write_manifest(folder: Path, manifest: dict) -> None:
    write_json(folder / MANIFEST, manifest)


def gguf_path(folder: Path, model: str, version: str, kind: str) -> Path:
    return folder / "gguf" / f"{model}-{version}-{kind}.gguf"
