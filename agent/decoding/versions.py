"""Model versions: a content hash of the weights, stable across processes and devices."""

from __future__ import annotations

import hashlib

import torch


def weights_version(model: torch.nn.Module, length: int = 12) -> str:
    """Hex digest of every parameter and buffer (name, dtype, shape, bytes), in name order."""
    digest = hashlib.sha256()
    state = model.state_dict()
    for name in sorted(state):
        tensor = state[name].detach().to("cpu").contiguous()
        digest.update(name.encode())
        digest.update(str(tensor.dtype).encode())
        digest.update(str(tuple(tensor.shape)).encode())
        digest.update(tensor.view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()[:length]
