"""A LoRA adapter (agent/pretrained/lora.py) as a GGUF adapter file for llama.cpp (``llama-server --lora FILE``).

What llama.cpp checks when it loads one (src/llama-adapter.cpp): ``general.type`` is ``adapter``,
``adapter.type`` is ``lora``, ``general.architecture`` is the base model's; every tensor is named after the
base model's weight it adapts plus ``.lora_a`` or ``.lora_b`` (``blk.3.attn_v.weight.lora_a``), and its shape
agrees with that weight: A is (rank x in) and B (out x rank) in row-major terms, the same as PEFT's
``lora_A`` and ``lora_B``. At run time llama.cpp adds ``scale * alpha / rank * B (A x)`` to the weight's
product (``adapter.lora.alpha``; ``scale`` is 1 unless ``--lora-scaled`` or ``/lora-adapters`` says otherwise),
which is the update transformers applies here.

The query and key projections are stored with rows permuted for llama.cpp's rotary layout
(agent/kit/gguf.py's ``rope_interleave``), so their B gets the same permutation: ``(P B) A = P (B A)``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from agent.kit.gguf import rope_interleave
from agent.pretrained import lora

# transformers' module name -> llama.cpp's tensor name inside block i
NAMES = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
         "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
         "mlp.down_proj": "ffn_down"}
DTYPES = {"f16": np.float16, "f32": np.float32}


def gguf_name(module: str) -> str:
    """``model.layers.3.self_attn.v_proj`` -> ``blk.3.attn_v.weight`` (ValueError for anything else)."""
    parts = module.split(".")
    if len(parts) == 5 and parts[:2] == ["model", "layers"] and parts[2].isdigit():
        found = NAMES.get(".".join(parts[3:]))
        if found is not None:
            return f"blk.{parts[2]}.{found}.weight"
    raise ValueError(f"{module}: llama.cpp has no tensor for this layer")


def base_fields(base: Path) -> tuple[str, int, int]:
    """(architecture, attention heads, key/value heads) of the base model's GGUF."""
    import gguf

    reader = gguf.GGUFReader(base)

    def value(key: str):
        field = reader.fields.get(key)
        if field is None:
            raise ValueError(f"{base}: no {key}")
        return field.contents()

    arch = value("general.architecture")
    heads = int(value(f"{arch}.attention.head_count"))
    kv = reader.fields.get(f"{arch}.attention.head_count_kv")
    return arch, heads, int(kv.contents()) if kv is not None else heads


def export_adapter(folder: Path, out: Path, base: Path, *, name: str = "", dtype: str = "f16") -> int:
    """Write the adapter saved in ``folder`` (PEFT layout) to ``out`` as a GGUF LoRA adapter for the model
    in the GGUF file ``base``; the tensor count. The file appears whole."""
    import gguf

    architecture, heads, kv_heads = base_fields(base)
    if dtype not in DTYPES:
        raise ValueError(f"dtype: expected one of {', '.join(DTYPES)}, got {dtype!r}")
    spec = lora.read_spec(folder)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    writer = gguf.GGUFWriter(tmp, architecture)
    writer.add_string("general.type", "adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", float(spec.alpha))
    if name:
        writer.add_name(name)
    count = 0
    for module, (a, b) in sorted(lora.pairs(folder).items()):
        target = gguf_name(module)
        a_np, b_np = a.float().numpy(), b.float().numpy()
        if target.endswith(("attn_q.weight", "attn_k.weight")):
            b_np = rope_interleave(b_np, heads if ".attn_q." in target else kv_heads)
        writer.add_tensor(target + ".lora_a", np.ascontiguousarray(a_np.astype(DTYPES[dtype])))
        writer.add_tensor(target + ".lora_b", np.ascontiguousarray(b_np.astype(DTYPES[dtype])))
        count += 2
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(out)
    return count
