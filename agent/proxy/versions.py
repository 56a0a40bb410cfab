"""Model versions of an upstream engine: what it serves, read from its own pages.

llama.cpp's ``/props`` names the target's GGUF (``model_path``); when the proxy can read that file the
version is its base name plus a sha256 of its content (streamed, cached by path, size and modification time,
so a re-read costs a stat), else base name plus size, else the ``model`` id of ``/v1/models``. The draft
likewise when the engine reports its draft model, else the pool's configured draft version.

A target served with LoRA adapters (llama.cpp ``--lora``; its ``/lora-adapters`` lists each adapter's path
and scale) is another model: its version is the base's followed by ``+`` and each applied adapter's version
(``*SCALE`` when the scale is not 1), so a new adapter file, or one switched on or off, is a new target.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any

from specwatch_core.files import sha256_of

HASH_LENGTH = 12
# Where engines put the draft model's path and the draft length in /props (the names vary by build).
DRAFT_PATH_KEYS = ("model_draft_path", "draft_model_path", "speculative.model_path", "model_draft")
LOOKAHEAD_KEYS = ("speculative.n_max", "spec_draft_n_max", "draft_n_max", "n_draft", "speculative_n_max")


class FileVersions:
    """Content hashes of model files, cached by (path, size, mtime); thread-safe, bounded."""

    def __init__(self, hash_files: bool = True, max_entries: int = 64):
        self.hash_files = hash_files
        self.max_entries = max_entries
        self._cache: OrderedDict[tuple[str, int, int], str] = OrderedDict()
        self._lock = threading.Lock()

    def of(self, path: str) -> str:
        """``NAME@SHA`` of the file at ``path``; ``NAME:SIZE`` when it cannot be hashed (or hashing is off);
        ``NAME`` when the proxy cannot see the file (an engine in another container)."""
        name = os.path.basename(path) or path
        try:
            st = os.stat(path)
        except OSError:
            return _clip(name)
        if not self.hash_files:
            return _clip(f"{name}:{st.st_size}")
        key = (path, st.st_size, st.st_mtime_ns)
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                return found
        try:
            digest = sha256_of(path)
        except OSError:
            return _clip(f"{name}:{st.st_size}")
        version = f"{_clip(name, 128 - HASH_LENGTH - 1)}@{digest[:HASH_LENGTH]}"
        with self._lock:
            self._cache[key] = version
            while len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)
        return version


def props_paths(props: Any) -> tuple[str | None, str | None]:
    """(target model path, draft model path) named by a /props answer (None where absent)."""
    if not isinstance(props, dict):
        return None, None
    target = props.get("model_path")
    draft = _find(props, DRAFT_PATH_KEYS)
    return (target if isinstance(target, str) and target else None,
            draft if isinstance(draft, str) and draft else None)


def lora_adapters(answer: Any) -> list[tuple[str, float]]:
    """(path, scale) of every adapter a llama.cpp ``/lora-adapters`` answer lists with a non-zero scale, in
    its order (an engine without the page answers 404: no adapters)."""
    if not isinstance(answer, list):
        return []
    found = []
    for item in answer:
        if not isinstance(item, dict):
            continue
        path, scale = item.get("path"), item.get("scale", 1.0)
        if isinstance(path, str) and path and isinstance(scale, (int, float)) and scale != 0:
            found.append((path, float(scale)))
    return found


def with_adapters(target: str, adapters: list[tuple[str, float]], files: FileVersions) -> str:
    """The version of ``target`` served with ``adapters`` ((path, scale) pairs, as ``lora_adapters``)."""
    parts = [target]
    for path, scale in adapters:
        parts.append(files.of(path) + ("" if scale == 1.0 else f"*{scale:g}"))
    return _clip("+".join(parts))  # too long: the adapters' hashes are kept, the base's name cut


def props_lookahead(props: Any) -> int | None:
    """The draft length a /props answer reports, or None when it reports none."""
    found = _find(props, LOOKAHEAD_KEYS)
    return found if type(found) is int and found >= 0 else None


def slots_speculate(slots: Any) -> bool | None:
    """Whether a /slots answer says the engine speculates (llama.cpp b11434: ``speculative`` per slot; its
    /props ``speculative.types`` shows request defaults, "none" even with a draft loaded); None when unsaid."""
    if not isinstance(slots, list) or not slots or not all(isinstance(s, dict) for s in slots):
        return None
    found = [s.get("speculative") for s in slots]
    return any(found) if all(isinstance(v, bool) for v in found) else None


def models_id(answer: Any) -> str | None:
    """The first model id of a /v1/models answer."""
    data = answer.get("data") if isinstance(answer, dict) else None
    if isinstance(data, list) and data and isinstance(data[0], dict):
        found = data[0].get("id")
        if isinstance(found, str) and found:
            return _clip(found)
    return None


def _find(tree: Any, keys: tuple[str, ...], depth: int = 0) -> Any:
    """The first of ``keys`` found in nested objects of ``tree`` (breadth first, a few levels deep)."""
    if not isinstance(tree, dict) or depth > 3:
        return None
    for key in keys:
        if key in tree:
            return tree[key]
    for value in tree.values():
        found = _find(value, keys, depth + 1)
        if found is not None:
            return found
    return None


def _clip(text: str, length: int = 128) -> str:
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text[-length:]
