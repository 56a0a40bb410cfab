"""Model versions of an upstream engine, from what its pages name (each engine's adapter says which pages).

When an engine names a model file the proxy can read (llama.cpp's ``/props`` ``model_path``), the version is
its base name plus a sha256 of its content (streamed, cached by path, size and modification time, so a re-read
costs a stat), else base name plus size, else the name alone; engines that name a model id (vLLM's and
TensorRT-LLM's ``/v1/models``, SGLang's ``/get_model_info``) give that id. The draft likewise when the engine
reports its draft model, else the pool's configured draft version.

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
            return clip(name)
        if not self.hash_files:
            return clip(f"{name}:{st.st_size}")
        key = (path, st.st_size, st.st_mtime_ns)
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                return found
        try:
            digest = sha256_of(path)
        except OSError:
            return clip(f"{name}:{st.st_size}")
        version = f"{clip(name, 128 - HASH_LENGTH - 1)}@{digest[:HASH_LENGTH]}"
        with self._lock:
            self._cache[key] = version
            while len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)
        return version


def with_adapters(target: str, adapters: tuple[tuple[str, float], ...], files: FileVersions) -> str:
    """The version of ``target`` served with ``adapters`` ((path, scale) pairs, as the engine lists them)."""
    parts = [target]
    for path, scale in adapters:
        parts.append(files.of(path) + ("" if scale == 1.0 else f"*{scale:g}"))
    return clip("+".join(parts))  # too long: the adapters' hashes are kept, the base's name cut


def models_id(answer: Any) -> str | None:
    """The first model id of a /v1/models answer."""
    data = answer.get("data") if isinstance(answer, dict) else None
    if isinstance(data, list) and data and isinstance(data[0], dict):
        found = data[0].get("id")
        if isinstance(found, str) and found:
            return clip(found)
    return None


def find(tree: Any, keys: tuple[str, ...], depth: int = 0) -> Any:
    """The first of ``keys`` found in nested objects of ``tree`` (breadth first, a few levels deep)."""
    if not isinstance(tree, dict) or depth > 3:
        return None
    for key in keys:
        if key in tree:
            return tree[key]
    for value in tree.values():
        found = find(value, keys, depth + 1)
        if found is not None:
            return found
    return None


def clip(text: str, length: int = 128) -> str:
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text[-length:]
