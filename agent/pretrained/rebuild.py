"""Distil the draft for a prepared model: the target's answers from a llama-server started here to the training
prompts of every workload domain (agent/workload/), then the kit's training loop (agent/pretrained/distill.py),
from scratch or continuing from a draft; optionally ship it into the repository.

Every domain is distilled on, not only those where a draft pays most: a draft that never saw a domain's answers
under the current target accepts little there, so a target update cannot be seen to break it (the guard and
StaleDraft compare the draft's acceptance before and after the update)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

from agent.kit.train import Progress
from agent.pretrained.distill import build_draft, load_streams, save_streams, ship, streams_path
from agent.pretrained.prepare import Prepared
from agent.workload import prompts as workload


PER_DOMAIN = 64  # training prompts a domain the teacher answers (the first, in the set's order)
NEW_TOKENS = 64  # answer tokens a prompt: the benchmarks' and the demo's length


def training_prompts(per_domain: int = PER_DOMAIN) -> list[workload.Prompt]:
    """The first ``per_domain`` training prompts of each workload domain, domain by domain."""
    if per_domain < 1:
        raise ValueError(f"per_domain must be >= 1, got {per_domain}")
    return [p for d in workload.domains() for p in workload.load(d, "train")[:per_domain]]


def teacher_data(prepared: Prepared, new_tokens: int = NEW_TOKENS, per_domain: int = PER_DOMAIN,
                 say: Callable[[str], None] = print, progress: Callable[[int, int], None] | None = None) -> Path:
    """Ask llama-server (the target as prepared) for its greedy answers to the training prompts."""
    from transformers import AutoTokenizer

    from agent.engines.llamacpp import LlamaServer, LlamaServerConfig
    from agent.pretrained.teacher import engine_streams

    train = training_prompts(per_domain)
    tokenizer = AutoTokenizer.from_pretrained(prepared.hf)
    threads = max(1, len(os.sched_getaffinity(0)))
    config = LlamaServerConfig(model=prepared.target_gguf, ctx_size=4 * 1024, parallel=4, threads=threads)
    began = time.perf_counter()
    say(f"{prepared.name}: the target's greedy answers to {len(train)} training prompts (llama-server, "
        f"{threads} threads, 4 slots)")
    with LlamaServer(config) as server:
        streams = engine_streams(server.base_url, tokenizer, [p.messages for p in train], new_tokens,
                                 concurrency=4, progress=progress)
    about = {"prompts": len(train), "per_domain": per_domain, "domains": sorted({p.domain for p in train}),
             "new_tokens": new_tokens, "engine": "llama-server", "target_version": prepared.target_version,
             "seconds": round(time.perf_counter() - began, 1)}
    return save_streams(prepared, streams, about)


def rebuild_draft(prepared: Prepared, *, steps: int = 600, ship_it: bool = False, fresh_data: bool = False,
                  per_domain: int = PER_DOMAIN, start: Path | None = None, say: Callable[[str], None] = print,
                  progress: Progress | None = None, data_progress: Callable[[int, int], None] | None = None) -> dict:
    """Teacher data (kept unless ``fresh_data`` or asked for another ``per_domain``), a draft trained under the
    model's folder (from scratch, or from the draft folder ``start``); with ``ship_it`` the draft is written into
    the repository. What was built."""
    kept = streams_path(prepared).is_file() and load_streams(prepared)[1].get("per_domain") == per_domain
    if fresh_data or not kept:
        teacher_data(prepared, per_domain=per_domain, say=say, progress=data_progress)
    out = prepared.root / "draft-trained"
    info = build_draft(prepared, out, steps=steps, start=start, progress=progress)
    say(f"{prepared.name}: draft {info['version']} trained in {info['train_seconds']:.0f} s, loss {info['loss']}")
    if ship_it:
        manifest = ship(prepared, out, info)
        info = {**info, "shipped_version": manifest["version"]}
    return info
