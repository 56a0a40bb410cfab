"""Target v2 of a pretrained model: target v1 plus a LoRA adapter that answers one domain in a new format.

``build_v2`` fine-tunes an adapter (agent/pretrained/lora.py) on the examples of agent/pretrained/v2_data.py
(logs answered in the new log format; copy and chat answered as v1 answers them), next-token cross-entropy on
answer tokens only, and writes it twice: for transformers (PEFT layout, float16) and for llama.cpp (a GGUF
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


def answer_loss(model, ids: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy (nats per answer token); the output layer runs on answer positions only (it is a fifth
    of SmolLM2-135M's weights, and most positions are prompt)."""
    hidden = model.model(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state
    scored = labels != -100
    logits = model.lm_head(hidden[scored])
    return F.cross_entropy(logits.float(), labels[scored])


def train_adapter(model, examples: list[v2_data.Example], pad: int, *, steps: int, lr: float = 1e-3,
                  batch_size: int = 4, changed_share: float = 0.5, seed: int = 0, precision: str = "auto",
                  progress: Progress | None = None) -> dict:
    """Train the adapter attached to ``model`` in place: each batch draws ``changed_share`` of its examples
    from the changed domain, the rest from the replayed ones. What was done (loss, seconds)."""
    rng = random.Random(seed)
    change = [e for e in examples if e.domain == logs.DOMAIN]
    keep = [e for e in examples if e.domain != logs.DOMAIN]
    n_change = max(1, round(batch_size * changed_share)) if keep else batch_size
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.99), weight_decay=0.0)
    bf16 = resolve_precision(precision) == "bfloat16"
    smooth, began = float("nan"), time.perf_counter()
    model.train()
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, steps, lr, warmup=max(1, steps // 10))
        chosen = rng.sample(change, min(n_change, len(change))) + rng.sample(keep, min(batch_size - n_change,
                                                                                        len(keep)))
        ids, mask, labels = batch_tensors(chosen, pad)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = answer_loss(model, ids, mask, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        value = float(loss.detach())
        smooth = value if math.isnan(smooth) else 0.9 * smooth + 0.1 * value
        if progress is not None:
            progress(step + 1, steps, smooth)
    model.eval()
    return {"loss": round(smooth, 4), "train_seconds": round(time.perf_counter() - began, 1),
            "precision": "bfloat16" if bf16 else "float32"}


def build_v2(prepared: Prepared, *, steps: int = 60, spec: lora.LoraSpec = lora.LoraSpec(), lr: float = 2e-3,
             replay_per_domain: int = 32, seed: int = 0, say: Callable[[str], None] = print,
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
    say(f"{prepared.name}: target v1's own answers to {2 * replay_per_domain} copy and chat training prompts")
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


def load_v2(prepared: Prepared, merged: bool = True) -> torch.nn.Module:
    """Target v2 for transformers: the target checkpoint with the adapter (merged into the weights unless
    ``merged`` is False)."""
    if prepared.hf is None or prepared.lora is None:
        raise FileNotFoundError(f"{prepared.name}: no target v2 yet; run specwatch models pretrained --lora-v2")
    model = lora.load(load_model(prepared.hf, device="cpu", dtype="float32"), prepared.lora)
    return lora.merge(model) if merged else model
