"""The pretrained target as a transformers checkpoint: transformers reads the GGUF (dequantizing it to
float32, ~30-40 s for SmolLM2-135M), then the weights are saved as safetensors so later loads take seconds."""

from __future__ import annotations

from pathlib import Path

import torch


def from_gguf(gguf: Path, out: Path) -> None:
    """Write ``out`` (config, float32 safetensors, tokenizer with its chat template) from ``gguf``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agent.kit.load import quiet_progress

    with quiet_progress():
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # A model loaded from GGUF keeps a quantization_config and transformers refuses to save it: rebuild
    # a plain model of the same configuration around the dequantized weights.
    config = loaded.config
    config.quantization_config = None
    del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict())
    tmp = out.with_name(out.name + ".tmp")
    plain.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    tmp.replace(out)  # whole or absent: a kill mid-write leaves only the .tmp folder
