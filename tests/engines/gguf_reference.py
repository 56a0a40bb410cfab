"""A numpy forward pass of a llama GGUF in llama.cpp's conventions (rotary embedding on adjacent pairs),
so the exporter is checked against transformers without a llama.cpp build."""

from __future__ import annotations

import numpy as np


def read(path) -> tuple[dict[str, np.ndarray], dict]:
    """Tensors by name (float64) and the hyper-parameters the forward pass needs."""
    import gguf

    reader = gguf.GGUFReader(path)
    tensors = {t.name: np.asarray(t.data, dtype=np.float64) for t in reader.tensors}

    def value(key):
        field = reader.fields[key]
        return field.parts[field.data[0]][0]

    hp = {"heads": int(value("llama.attention.head_count")), "kv_heads": int(value("llama.attention.head_count_kv")),
          "layers": int(value("llama.block_count")), "theta": float(value("llama.rope.freq_base")),
          "eps": float(value("llama.attention.layer_norm_rms_epsilon"))}
    return tensors, hp


def _rms(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def _rope_pairs(x, theta):
    """x: (heads, seq, dim); rotates (x0, x1), (x2, x3), ... as llama.cpp's normal rope does."""
    dim = x.shape[-1]
    freqs = theta ** (-np.arange(0, dim, 2) / dim)
    angles = np.arange(x.shape[1])[:, None] * freqs[None, :]
    cos, sin = np.cos(angles), np.sin(angles)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def logits(path, ids: list[int]) -> np.ndarray:
    """Next-token logits at every position of ``ids``: (len(ids), vocab)."""
    t, hp = read(path)
    x = t["token_embd.weight"][ids]
    n = len(ids)
    mask = np.triu(np.full((n, n), -np.inf), 1)
    for i in range(hp["layers"]):
        b = f"blk.{i}."
        h = _rms(x, t[b + "attn_norm.weight"], hp["eps"])
        q = (h @ t[b + "attn_q.weight"].T).reshape(n, hp["heads"], -1).transpose(1, 0, 2)
        k = (h @ t[b + "attn_k.weight"].T).reshape(n, hp["kv_heads"], -1).transpose(1, 0, 2)
        v = (h @ t[b + "attn_v.weight"].T).reshape(n, hp["kv_heads"], -1).transpose(1, 0, 2)
        q, k = _rope_pairs(q, hp["theta"]), _rope_pairs(k, hp["theta"])
        group = hp["heads"] // hp["kv_heads"]
        k, v = np.repeat(k, group, 0), np.repeat(v, group, 0)
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1]) + mask
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        attn = (scores / scores.sum(-1, keepdims=True)) @ v
        x = x + attn.transpose(1, 0, 2).reshape(n, -1) @ t[b + "attn_output.weight"].T
        h = _rms(x, t[b + "ffn_norm.weight"], hp["eps"])
        gate = h @ t[b + "ffn_gate.weight"].T
        x = x + ((gate / (1 + np.exp(-gate))) * (h @ t[b + "ffn_up.weight"].T)) @ t[b + "ffn_down.weight"].T
    x = _rms(x, t["output_norm.weight"], hp["eps"])
    return x @ t.get("output.weight", t["token_embd.weight"]).T
