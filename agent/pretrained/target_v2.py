"""Target v2 of a pretrained model: target v1 plus a LoRA adapter that answers one domain in a new format.

``build_v2`` fine-tunes an adapter (agent/pretrained/lora.py) on the examples of agent/pretrained/v2_data.py
(logs answered in the new log format; the other workload domains answered as v1 answers them): cross-entropy
on the new answers, KL to v1 on the others' (answer tokens only), and writes it twice: for transformers (PEFT layout, float16) and for llama.cpp (a GGUF
LoRA adapter, ``--lora``). ``load_v2`` gives the merged v2 model for in-process decoding and the guard.

Versions: llama.cpp serves v2 as the base GGUF plus the adapter file; both are hashed, so the served target
version is ``base@sha+adapter@sha`` (agent/proxy/versions.py) and changes whenever the adapter does.
"""

from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

from agent.kit.load import load_model
from agent.kit.train import lr_at, resolve_precision
from agent.pretrained import logs, lora, v2_data
from agent.pretrained.prepare import Prepared
from agent.pretrained.v2_ship import ADAPTER, install_gguf
Progress = Callable[[int, int, float], None]  # (steps done, total steps, smoothed loss)


def batch_tensors(examples: list[v2_data.Example], pad: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(input ids, attention mask, labels) right-padded; labels are -100 outside the answers."""
    width = max(len(e.ids) for e in examples) - 1
    ids = torch.full((len(examples), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    labels = torch.full_like(ids, -100)
    for row, e in enumerate(examples):
        n = len(e.ids) - 1
        ids[row, :n] = torch.tensor(e.ids[:-1])
        mask[row, :n] = 1
        labels[row, e.answer_start - 1:n] = torch.tensor(e.ids[e.answer_start:])
    return ids, mask, labels


def answer_logits(model, ids: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Logits at the answer positions only (the output layer is a fifth of SmolLM2-135M's weights, and most
    positions are prompt)."""
    hidden = model.model(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state
    return model.lm_head(hidden[labels != -100])


def answer_loss(model, ids: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy on the answer tokens (nats per token): learn the new answers."""
    return F.cross_entropy(answer_logits(model, ids, mask, labels).float(), labels[labels != -100])


def kept_loss(model, ids: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """KL(v1 || v2) over the whole vocabulary at the answer positions (nats per token), v1 being ``model`` with
    its adapters off: keep every next-token distribution of the unchanged domains, not only the argmax of
    v1's one answer (a greedy answer of a 135M model turns at the first near-tie that moves)."""
    with torch.no_grad(), lora.disabled(model):
        v1 = answer_logits(model, ids, mask, labels).float().log_softmax(-1)
    v2 = answer_logits(model, ids, mask, labels).float().log_softmax(-1)
    return F.kl_div(v2, v1, log_target=True, reduction="batchmean")


def train_adapter(model, examples: list[v2_data.Example], pad: int, *, steps: int, lr: float = 1e-3,
                  changed: int = 2, kept: int = 4, kept_weight: float = 1.0, seed: int = 0,
                  precision: str = "auto", progress: Progress | None = None) -> dict:
    """Train the adapter attached to ``model`` in place. Each step: cross-entropy on ``changed`` examples of
    the changed domain plus ``kept_weight`` x KL(v1 || v2) on ``kept`` replayed examples of the others
    (``kept_loss``). What was done (both losses, seconds)."""
    rng = random.Random(seed)
    change = [e for e in examples if e.domain == logs.DOMAIN]
    keep = [e for e in examples if e.domain != logs.DOMAIN]
    if not change:
        raise ValueError("examples: none of the changed domain")
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.99), weight_decay=0.0)
    bf16 = resolve_precision(precision) == "bfloat16"
    smooth = {"ce": float("nan"), "kl": float("nan")}
    began = time.perf_counter()
    model.train()
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, steps, lr, warmup=max(1, steps // 10))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            ce = answer_loss(model, *batch_tensors(rng.sample(change, min(changed, len(change))), pad))
            kl = (kept_loss(model, *batch_tensors(rng.sample(keep, min(kept, len(keep))), pad))
                  if keep and kept else torch.zeros((), dtype=ce.dtype))
        loss = ce + kept_weight * kl
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        for key, value in (("ce", float(ce.detach())), ("kl", float(kl.detach()))):
            smooth[key] = value if math.isnan(smooth[key]) else 0.9 * smooth[key] + 0.1 * value
        if progress is not None:
            progress(step + 1, steps, smooth["ce"] + kept_weight * smooth["kl"])
    model.eval()
    return {"loss": round(smooth["ce"], 4), "kl_to_v1": round(smooth["kl"], 4),
            "train_seconds": round(time.perf_counter() - began, 1), "precision": "bfloat16" if bf16 else "float32"}


def build_v2(prepared: Prepared, *, steps: int = 60, spec: lora.LoraSpec = lora.LoraSpec(), lr: float = 2e-3,
             replay_per_domain: int = 24, seed: int = 0, say: Callable[[str], None] = print,
             data_progress: Callable[[int, int], None] | None = None, progress: Progress | None = None) -> dict:
    """Train target v2's adapter for ``prepared`` and write it under its folder (PEFT and GGUF); what was
    built (versions, files, figures). The model's manifest names it from then on."""
    from transformers import AutoTokenizer

    if prepared.hf is None:
        raise FileNotFoundError(f"{prepared.name}: the transformers checkpoint is needed (prepare without --no-hf)")
    began = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(prepared.hf)
    model = load_model(prepared.hf, device="cpu", dtype="float32")
    torch.manual_seed(seed)
    kept = v2_data.kept_domains()
    say(f"{prepared.name}: target v1's own answers to {replay_per_domain} training prompts of each of "
        f"{', '.join(kept)}")
    examples = v2_data.changed(tokenizer)
    examples += v2_data.replayed(model, tokenizer, replay_per_domain, seed=seed, progress=data_progress)
    lora.attach(model, spec)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    say(f"{prepared.name}: training a rank-{spec.rank} adapter ({trainable / 1e6:.1f} M parameters) for {steps} steps")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    figures = train_adapter(model, examples, pad, steps=steps, lr=lr, seed=seed, progress=progress)
    folder = prepared.root / ADAPTER
    lora.save(model, folder, spec, base=f"{prepared.name}@{prepared.target_version}")
    info = {"steps": steps, "lr": lr, "lora": lora.spec_dict(spec), "trainable_parameters": trainable,
            "examples": {d: sum(e.domain == d for e in examples) for d in sorted({e.domain for e in examples})},
            **figures, "seconds": round(time.perf_counter() - began, 1)}
    (folder / "training.json").write_text(json.dumps(info, indent=2) + "\n")
    return {**install_gguf(prepared.root, prepared.target_gguf, prepared.name), "training": info}


def load_v2(prepared: Prepared, merged: bool = True, adapter: Path | None = None) -> torch.nn.Module:
    """Target v2 for transformers: the target checkpoint with the adapter (merged into the weights unless
    ``merged`` is False). ``adapter``: a PEFT folder other than the installed one (a copy taken at a run's start)."""
    adapter = adapter or prepared.lora
    if prepared.hf is None or adapter is None:
        raise FileNotFoundError(f"{prepared.name}: no target v2 yet; run specwatch models pretrained --lora-v2")
    model = lora.load(load_model(prepared.hf, device="cpu", dtype="float32"), adapter)
    return lora.merge(model) if merged else model
