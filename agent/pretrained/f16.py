"""The target as F16: the shipped quantized GGUF converted by llama.cpp's own ``llama-quantize`` (built beside
llama-server by .ci/install-llama), cached beside it under SPECWATCH_HOME.

Why: on a CPU a quantized 135M model's plain step is so cheap that n-gram speculation barely pays (Q4_1:
within 1-3% of no speculation, docs/real-model.md), while in F16 a plain step costs more and n-gram pools
run 1.8-1.9x faster alone; that is the model on which the load changes the answer (bench/load_aware.py).
The conversion takes a few seconds; the file (~270 MB) is named by the source's version, so a new source
converts afresh and an existing file is reused.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from agent.engines.llamacpp import find_binary
from agent.pretrained.prepare import Prepared


def f16_target(model: Prepared, binary: str | Path | None = None) -> Path:
    """The F16 GGUF of ``model``'s target, converted once (RuntimeError with llama-quantize's output on
    failure, FileNotFoundError when llama-quantize is not beside llama-server)."""
    out = model.target_gguf.with_name(f"target-{model.target_version}-f16.gguf")
    if out.is_file():
        return out
    quantize = find_binary(binary).with_name("llama-quantize")
    if not quantize.is_file():
        raise FileNotFoundError(f"llama-quantize not found beside llama-server ({quantize}): run make engine")
    partial = out.with_suffix(".partial")
    done = subprocess.run([str(quantize), "--allow-requantize", str(model.target_gguf), str(partial), "F16"],
                          capture_output=True, text=True)
    if done.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"llama-quantize failed ({done.returncode}): {done.stderr[-2000:]}")
    partial.replace(out)
    return out
