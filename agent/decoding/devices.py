"""Device and dtype resolution: CUDA when present, never CPU-only by design."""

from __future__ import annotations

import torch

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """'auto' picks CUDA when available, else CPU; anything else is passed to torch.device."""
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """None or 'auto' means float32 on CPU and float16 on CUDA."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in (None, "auto"):
        return torch.float16 if device.type == "cuda" else torch.float32
    try:
        return _DTYPES[dtype]
    except KeyError:
        raise ValueError(f"dtype: expected one of auto, {', '.join(_DTYPES)}; got {dtype!r}") from None


def synchronize(device: torch.device) -> None:
    """Wait for queued kernels so wall-clock readings cover the work (a no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
