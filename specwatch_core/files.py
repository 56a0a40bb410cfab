"""A file's sha256, read in 1 MiB blocks (model files are tens of MB to GB): the proxy's model versions and
the shipped kit's checks both use it."""

from __future__ import annotations

import hashlib
import os

CHUNK = 1 << 20


def sha256_of(path: str | os.PathLike) -> str:
    """Hex sha256 of the file's content; OSError when it cannot be read."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()
