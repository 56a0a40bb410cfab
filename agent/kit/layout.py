"""Where a kit lives on disk: ``home()/kit/<size>/`` with one folder per model and a manifest.

```
kit/<size>/manifest.json     spec, seeds, sizes, versions, timings; a stage is done once listed here
kit/<size>/prompts.json      {domain: [prompt, ...]}, held out from training
kit/<size>/data/             training token streams (train-<source>.npy) and heldout.json
kit/<size>/target-v1/ draft/ target-v2/   save_pretrained folders (safetensors + ByT5 tokenizer)
kit/<size>/<stage>.ckpt      checkpoint of an unfinished training stage
```
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from specwatch_core import settings

STAGES = ("corpus", "target-v1", "draft", "target-v2")
MODELS = ("target-v1", "draft", "target-v2")
MANIFEST, PROMPTS, DATA, HELDOUT = "manifest.json", "prompts.json", "data", "heldout.json"


def kit_dir(size: str, home: str | Path | None = None) -> Path:
    return Path(home if home is not None else settings.home()) / "kit" / size


def read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write_json(path: Path, data: Any) -> None:
    """Write atomically, so a kill mid-write never leaves a half manifest."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, path)


def read_manifest(root: Path) -> dict | None:
    path = root / MANIFEST
    return read_json(path) if path.exists() else None


def save_sources(root: Path, train: dict[str, np.ndarray]) -> None:
    (root / DATA).mkdir(parents=True, exist_ok=True)
    for source, tokens in train.items():
        np.save(root / DATA / f"train-{source}.npy", tokens)


def load_sources(root: Path) -> dict[str, np.ndarray]:
    """Training token streams by source name."""
    paths = sorted((root / DATA).glob("train-*.npy"))
    return {path.stem.removeprefix("train-"): np.load(path) for path in paths}


def load_prompts(root: Path) -> dict[str, list[str]]:
    return read_json(root / PROMPTS)


def load_heldout(root: Path) -> dict[str, str]:
    return read_json(root / DATA / HELDOUT)
