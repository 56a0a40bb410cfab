"""The draft specwatch distils for a pretrained target: a small llama over the target's own tokenizer.

Shape: 2 layers of width 192 (3 heads of 64, one key/value head), tied embeddings: 10.3 M parameters,
20.6 MB in float16 (small enough to ship in the repository), about a tenth of SmolLM2-135M's cost per token
(the 49,152 x 192 output projection dominates it). The embedding starts from the target's, projected onto
its first 192 principal directions, so the draft begins with the target's idea of which tokens are alike.

Training text is the target's own path: each training prompt in the chat template, followed by the
target's greedy answer (sequence-level distillation, Kim & Rush 2016, arXiv 1606.07947; DistillSpec,
arXiv 2310.08461, on why the target's own outputs are the text to distil on). The loss is next-token
cross-entropy on that text: in greedy speculation a drafted token is accepted when it equals the
target's argmax, which is exactly the token that follows in the text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch


@dataclass(frozen=True)
class DraftShape:
    hidden: int = 192
    layers: int = 2
    heads: int = 3
    kv_heads: int = 1
    intermediate: int = 512
    max_positions: int = 2048

    def __post_init__(self) -> None:
        for name in ("hidden", "layers", "heads", "kv_heads", "intermediate", "max_positions"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"DraftShape.{name}: must be a positive integer, got {value!r}")
        if self.hidden % self.heads or self.heads % self.kv_heads:
            raise ValueError("DraftShape: hidden must divide into heads, heads into kv_heads")

    @classmethod
    def of(cls, config) -> "DraftShape":
        """The shape of a draft from its transformers config."""
        return cls(config.hidden_size, config.num_hidden_layers, config.num_attention_heads,
                   config.num_key_value_heads, config.intermediate_size, config.max_position_embeddings)


def new_draft(target: torch.nn.Module, shape: DraftShape = DraftShape(), seed: int = 0) -> torch.nn.Module:
    """A fresh draft for ``target`` (same vocabulary and special tokens), its embedding from the target's."""
    from transformers import LlamaConfig, LlamaForCausalLM

    t = target.config
    rope = getattr(t, "rope_parameters", None) or {"rope_type": "default", "rope_theta": 10000.0}
    config = LlamaConfig(vocab_size=t.vocab_size, hidden_size=shape.hidden, intermediate_size=shape.intermediate,
                         num_hidden_layers=shape.layers, num_attention_heads=shape.heads,
                         num_key_value_heads=shape.kv_heads, max_position_embeddings=shape.max_positions,
                         rms_norm_eps=t.rms_norm_eps, rope_parameters=dict(rope), tie_word_embeddings=True,
                         bos_token_id=t.bos_token_id, eos_token_id=t.eos_token_id, pad_token_id=t.pad_token_id)
    torch.manual_seed(seed)
    draft = LlamaForCausalLM(config)
    with torch.no_grad():
        draft.model.embed_tokens.weight.copy_(projected_embedding(target.get_input_embeddings().weight,
                                                                  shape.hidden))
    return draft


def projected_embedding(embedding: torch.Tensor, width: int) -> torch.Tensor:
    """The rows of ``embedding`` on its first ``width`` principal directions, scaled to the rms of the
    original rows (a float32 (vocab, width) tensor)."""
    e = embedding.detach().float()
    centred = e - e.mean(0, keepdim=True)
    _, _, v = torch.linalg.svd(centred, full_matrices=False)
    out = centred @ v[:width].T
    return out * (e.pow(2).mean().sqrt() / out.pow(2).mean().sqrt())


@torch.inference_mode()
def teacher_streams(target: torch.nn.Module, tokenizer, conversations: Sequence[list[dict]], new_tokens: int = 96,
                    batch_size: int = 16, progress: Callable[[int, int], None] | None = None) -> list[list[int]]:
    """Each conversation in the chat template, followed by the target's greedy answer (up to ``new_tokens``
    tokens, ending at its end-of-turn token): the token ids the draft is distilled on."""
    tokenizer.padding_side = "left"
    eos = target.config.eos_token_id
    out: list[list[int]] = []
    for start in range(0, len(conversations), batch_size):
        batch = conversations[start:start + batch_size]
        texts = [tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in batch]
        enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        generated = target.generate(**enc, max_new_tokens=new_tokens, do_sample=False, top_p=None, top_k=None,
                                    temperature=None, pad_token_id=tokenizer.pad_token_id, eos_token_id=eos)
        for row, mask in zip(generated, enc["attention_mask"]):
            ids = row[int(mask.numel() - mask.sum()):].tolist()  # drop the left padding
            prompt_len = int(mask.sum())
            answer = ids[prompt_len:]
            if eos in answer:
                answer = answer[:answer.index(eos) + 1]
            out.append(ids[:prompt_len] + answer)
        if progress is not None:
            progress(min(start + batch_size, len(conversations)), len(conversations))
    return out


def stream_array(streams: Sequence[Sequence[int]]) -> np.ndarray:
    """Streams joined into one uint16 token array (the kit trainer's windows run across them)."""
    return np.concatenate([np.asarray(s, dtype=np.uint16) for s in streams])
