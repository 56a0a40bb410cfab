"""The kit's models as GGUF files for llama.cpp (``specwatch models export-gguf``).

A kit model is a HF ``LlamaForCausalLM`` over the byte tokenizer (:mod:`agent.kit.tokenizer`). It is
written with the ``gguf`` package as llama.cpp's ``llama`` architecture:

- q and k projection rows are reordered for llama.cpp's rotary embedding, which rotates adjacent pairs
  (x0, x1), (x2, x3), ... where HF rotates the two halves of each head (x_i, x_{i + d/2}); this is the
  permutation llama.cpp's own converter applies (see :func:`rope_interleave`);
- the byte tokenizer becomes a "gpt2" (byte-level BPE) vocabulary: ids 0-2 are the kit's special tokens,
  id ``b + 3`` is byte ``b`` spelled as GPT-2's byte-to-unicode character, so llama.cpp's BPE splits any
  text into exactly the kit's byte ids. llama.cpp refuses a BPE vocabulary without merges, so one merge is
  written that can never apply (two 0xFF bytes: valid UTF-8 never holds 0xFF).

Files are named ``<model>-<version>-<dtype>.gguf`` with the kit's content-hash versions, so a proxy can tell
target v1 from v2 by the file behind the engine.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from agent.kit import layout, tokenizer
from agent.kit.load import KitNotBuiltError, load_model

DTYPES = ("f32", "f16")
SPECIAL_TOKENS = {tokenizer.PAD_ID: "<pad>", tokenizer.EOS_ID: "</s>", tokenizer.UNK_ID: "<unk>"}
# Bytes that never occur in valid UTF-8, so this merge never applies to text llama.cpp receives.
NEVER_MERGE = "\xff\xff"


def gguf_name(model: str, version: str, dtype: str = "f32") -> str:
    """File name of an exported kit model, e.g. ``target-v1-d1f5051f9d1b-f32.gguf``."""
    return f"{model}-{version}-{dtype}.gguf"


def byte_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table (byte-level BPE spells byte b this way)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {b: chr(b) for b in printable}
    shifted = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + shifted)
            shifted += 1
    return table


def vocabulary() -> tuple[list[str], list[int], list[str]]:
    """Token texts, token types and merges of the byte tokenizer as a "gpt2" vocabulary."""
    from gguf import TokenType

    spell = byte_to_unicode()
    tokens = [SPECIAL_TOKENS[i] for i in range(tokenizer.OFFSET)] + [spell[b] for b in range(256)]
    types = [int(TokenType.CONTROL)] * tokenizer.OFFSET + [int(TokenType.NORMAL)] * 256
    types[tokenizer.UNK_ID] = int(TokenType.UNKNOWN)
    merge = " ".join(spell[b] for b in NEVER_MERGE.encode("latin-1"))
    return tokens, types, [merge]


def rope_interleave(weight: np.ndarray, heads: int) -> np.ndarray:
    """Reorder a q or k projection's output rows per head from HF's half-split rotary layout to the
    adjacent-pair layout llama.cpp rotates: row j of the first half and row j of the second half of a
    head become rows 2j and 2j + 1."""
    rows = weight.shape[0]
    half = rows // heads // 2
    return weight.reshape(heads, 2, half, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


@dataclass(frozen=True)
class Exported:
    """One written file: the kit model it came from, its version and where it went."""

    model: str
    version: str
    path: Path
    tensors: int


def _hparams(config) -> dict:
    rope = getattr(config, "rope_parameters", None) or {}
    theta = rope.get("rope_theta", getattr(config, "rope_theta", 10000.0))
    if rope.get("rope_type", "default") != "default":
        raise ValueError(f"rope_parameters.rope_type: only 'default' rope exports, got {rope['rope_type']!r}")
    heads = config.num_attention_heads
    return {"heads": heads, "kv_heads": config.num_key_value_heads or heads,
            "head_dim": getattr(config, "head_dim", None) or config.hidden_size // heads,
            "theta": float(theta), "eps": float(config.rms_norm_eps)}


def _tensors(state: dict, config, hp: dict) -> Iterable[tuple[str, np.ndarray]]:
    """(GGUF name, array) pairs in llama.cpp's naming; tied embeddings write no separate output."""
    def get(name):
        return state[name].detach().to("cpu").float().numpy()

    yield "token_embd.weight", get("model.embed_tokens.weight")
    for i in range(config.num_hidden_layers):
        hf, blk = f"model.layers.{i}.", f"blk.{i}."
        yield blk + "attn_norm.weight", get(hf + "input_layernorm.weight")
        yield blk + "attn_q.weight", rope_interleave(get(hf + "self_attn.q_proj.weight"), hp["heads"])
        yield blk + "attn_k.weight", rope_interleave(get(hf + "self_attn.k_proj.weight"), hp["kv_heads"])
        yield blk + "attn_v.weight", get(hf + "self_attn.v_proj.weight")
        yield blk + "attn_output.weight", get(hf + "self_attn.o_proj.weight")
        yield blk + "ffn_norm.weight", get(hf + "post_attention_layernorm.weight")
        yield blk + "ffn_gate.weight", get(hf + "mlp.gate_proj.weight")
        yield blk + "ffn_up.weight", get(hf + "mlp.up_proj.weight")
        yield blk + "ffn_down.weight", get(hf + "mlp.down_proj.weight")
    yield "output_norm.weight", get("model.norm.weight")
    if not config.tie_word_embeddings:
        yield "output.weight", get("lm_head.weight")


def export_model(model_dir: str | Path, out_path: str | Path, *, dtype: str = "f32",
                 name: str | None = None, tokenizer_from: str | Path | None = None) -> int:
    """Write the llama model in ``model_dir`` (a save_pretrained folder) to ``out_path`` as GGUF.

    ``dtype`` f32 or f16 (matrices only; norms stay f32 as llama.cpp expects). The vocabulary is the kit's
    byte tokenizer, or with ``tokenizer_from`` every ``tokenizer.*`` field of that GGUF file (a draft
    distilled for a pretrained target shares its tokenizer, and llama.cpp checks that the two match).
    Returns the tensor count. The file appears atomically (written beside it, then renamed).
    """
    import gguf

    if dtype not in DTYPES:
        raise ValueError(f"dtype: expected one of {', '.join(DTYPES)}, got {dtype!r}")
    model = load_model(model_dir, device="cpu", dtype="float32")
    config = model.config
    fields = tokenizer_fields(tokenizer_from) if tokenizer_from is not None else None
    vocab = len(fields["tokenizer.ggml.tokens"][0]) if fields is not None else tokenizer.VOCAB_SIZE
    if config.model_type != "llama" or config.vocab_size != vocab:
        raise ValueError(f"{model_dir}: model_type {config.model_type!r} over {config.vocab_size} token ids; "
                         f"expected llama over {vocab} ({tokenizer_from or 'the kit byte tokenizer'})")
    hp = _hparams(config)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(f".{out_path.name}.tmp")
    writer = gguf.GGUFWriter(tmp, "llama")
    writer.add_name(name or Path(model_dir).name)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32 if dtype == "f32" else gguf.LlamaFileType.MOSTLY_F16)
    writer.add_vocab_size(config.vocab_size)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(hp["heads"])
    writer.add_head_count_kv(hp["kv_heads"])
    writer.add_rope_dimension_count(hp["head_dim"])
    writer.add_rope_freq_base(hp["theta"])
    writer.add_layer_norm_rms_eps(hp["eps"])
    if fields is not None:
        for key, (value, types) in fields.items():
            writer.add_key_value(key, value, types[0], types[1] if len(types) > 1 else None)
    else:
        _byte_vocabulary(writer)
    count = 0
    for tensor_name, array in _tensors(model.state_dict(), config, hp):
        if dtype == "f16" and array.ndim > 1:
            array = array.astype(np.float16)
        writer.add_tensor(tensor_name, np.ascontiguousarray(array))
        count += 1
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(out_path)
    return count


def _byte_vocabulary(writer) -> None:
    tokens, types, merges = vocabulary()
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    # The kit has no BOS and encodes without special tokens; EOS ends a generation as in transformers.
    writer.add_eos_token_id(tokenizer.EOS_ID)
    writer.add_pad_token_id(tokenizer.PAD_ID)
    writer.add_unk_token_id(tokenizer.UNK_ID)
    writer.add_add_bos_token(False)
    writer.add_add_eos_token(False)


def tokenizer_fields(path: str | Path) -> dict[str, tuple[object, list]]:
    """Every ``tokenizer.*`` field of a GGUF file: {key: (value, [value type, item type])}."""
    import gguf

    reader = gguf.GGUFReader(path)
    fields = {key: (field.contents(), list(field.types)) for key, field in reader.fields.items()
              if key.startswith("tokenizer.")}
    if "tokenizer.ggml.tokens" not in fields:
        raise ValueError(f"{path}: no tokenizer.ggml.tokens in this GGUF file")
    return fields


def export_kit(size: str = "full", out: str | Path | None = None, models: Iterable[str] = layout.MODELS,
               dtype: str = "f32", home: str | Path | None = None,
               progress: Callable[[str], None] | None = None) -> list[Exported]:
    """Export the built kit ``size`` (under ``home``) into ``out`` (default ``<kit>/gguf``).

    ``models`` picks among target-v1, draft, target-v2; ``progress`` gets one line per model
    (default: stderr). Raises :class:`KitNotBuiltError` when the kit is missing or unfinished.
    """
    models = list(models)
    unknown = [m for m in models if m not in layout.MODELS]
    if unknown or not models:
        raise ValueError(f"models: expected some of {', '.join(layout.MODELS)}, got {', '.join(unknown) or 'none'}")
    if dtype not in DTYPES:
        raise ValueError(f"dtype: expected one of {', '.join(DTYPES)}, got {dtype!r}")
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    root = layout.kit_dir(size, home)
    manifest = layout.read_manifest(root)
    missing = [m for m in models if manifest is None or m not in manifest.get("versions", {})
               or not (root / m / "config.json").exists()]
    if missing:
        raise KitNotBuiltError(f"the {size!r} model kit in {root} lacks {', '.join(missing)}; "
                               f"build it with: specwatch models build --size {size}")
    folder = Path(out) if out is not None else root / "gguf"
    done = []
    for model in models:
        version = manifest["versions"][model]
        path = folder / gguf_name(model, version, dtype)
        say(f"{model} ({version}): writing {path}")
        count = export_model(root / model, path, dtype=dtype, name=f"specwatch-kit-{size}-{model}")
        say(f"{model} ({version}): {count} tensors, {path.stat().st_size:,} bytes")
        done.append(Exported(model=model, version=version, path=path, tensors=count))
    return done
