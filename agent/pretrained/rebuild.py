"""Distil the draft for a prepared model from scratch: the target's answers from a llama-server started
here, then the kit's training loop (agent/pretrained/distill.py); optionally ship it into the repository."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

from agent.kit.train import Progress
from agent.pretrained import prompts as prompt_sets
from agent.pretrained.distill import build_draft, save_streams, ship, streams_path
from agent.pretrained.prepare import Prepared


def teacher_data(prepared: Prepared, new_tokens: int = 96, say: Callable[[str], None] = print,
                 progress: Callable[[int, int], None] | None = None) -> Path:
    """Ask llama-server (the target as prepared) for its greedy answers to every training prompt."""
    from transformers import AutoTokenizer

    from agent.engines.llamacpp import LlamaServer, LlamaServerConfig
    from agent.pretrained.teacher import engine_streams

    train = prompt_sets.prompts(split="train")
    tokenizer = AutoTokenizer.from_pretrained(prepared.hf)
    threads = max(1, len(os.sched_getaffinity(0)))
    config = LlamaServerConfig(model=prepared.target_gguf, ctx_size=4 * 1024, parallel=4, threads=threads)
    began = time.perf_counter()
    say(f"{prepared.name}: the target's greedy answers to {len(train)} training prompts (llama-server, "
        f"{threads} threads, 4 slots)")
    with LlamaServer(config) as server:
        streams = engine_streams(server.base_url, tokenizer, [p.messages for p in train], new_tokens,
                                 concurrency=4, progress=progress)
    about = {"prompts": len(train), "domains": sorted({p.domain for p in train}), "new_tokens": new_tokens,
             "engine": "llama-server", "target_version": prepared.target_version,
             "seconds": round(time.perf_counter() - began, 1)}
    return save_streams(prepared, streams, about)


def rebuild_draft(prepared: Prepared, *, steps: int = 600, ship_it: bool = False, fresh_data: bool = False,
                  say: Callable[[str], None] = print, progress: Progress | None = None,
                  data_progress: Callable[[int, int], None] | None = None) -> dict:
    """Teacher data (kept unless ``fresh_data``), a freshly trained draft under the model's folder; with
    ``ship_it`` the draft is written into the repository. What was built."""
    if fresh_data or not streams_path(prepared).is_file():
        teacher_data(prepared, say=say, progress=data_progress)
    out = prepared.root / "draft-trained"
    info = build_draft(prepared, out, steps=steps, progress=progress)
    say(f"{prepared.name}: draft {info['version']} trained in {info['train_seconds']:.0f} s, loss {info['loss']}")
    if ship_it:
        manifest = ship(prepared, out, info)
        info = {**info, "shipped_version": manifest["version"]}
    return info
