"""Re-distil the real model's draft against the new target from the live prompt sample, quickly: the target's
greedy answers to the sampled prompts (from a llama-server serving it, agent/pretrained/teacher.py's
``engine_streams``), then a few dozen steps of the draft's own training loop (agent/kit/train.py, next-token
cross-entropy on prompt + answer, as agent/pretrained/distill.py trains it) starting from the current draft,
not from scratch; the result written as a transformers checkpoint and a GGUF for llama.cpp (F16, the target's
tokenizer). Online Speculative Decoding (arXiv 2310.07177) does this continuously; here it is one short round.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Sequence

Say = Callable[[str], None]


def focus(sample: dict[str, list[str]], stale: str | None, own: int = 16, others: int = 4) -> dict[str, list[str]]:
    """The prompts to re-distil on: up to ``own`` of the stale domain's and ``others`` of every other domain's
    (so the draft does not forget them), in the sample's order. Without a stale domain, ``others`` of each."""
    return {d: texts[:own if d == stale else others] for d, texts in sample.items() if texts}


def live_streams(urls: str | Sequence[str], tokenizer, sample: dict[str, list[str]], new_tokens: int = 64,
                 concurrency: int = 2) -> list[list[int]]:
    """Each sampled prompt (text, as the user's message) in the chat template followed by the engine's greedy
    answer, as token ids, in the sample's order. With several ``urls`` (servers of the same target) the prompts
    are dealt out among them, ``concurrency`` at a time on each."""
    from agent.pretrained.teacher import engine_streams

    urls = [urls] if isinstance(urls, str) else list(urls)
    conversations = [[{"role": "user", "content": text}] for texts in sample.values() for text in texts]
    shares = [conversations[i::len(urls)] for i in range(len(urls))]
    with ThreadPoolExecutor(len(urls)) as pool:
        answered = list(pool.map(lambda u, c: engine_streams(u, tokenizer, c, new_tokens, concurrency), urls, shares))
    out: list[list[int]] = [[] for _ in conversations]
    for i, streams in enumerate(answered):
        out[i::len(urls)] = streams
    return out


def redistill(model, url: str | Sequence[str], sample: dict[str, list[str]], out: Path, *,
              draft: Path | None = None, steps: int = 40, batch_size: int = 8, seq_len: int = 128, lr: float = 1e-3,
              new_tokens: int = 64, seed: int = 0, threads: int = 0, say: Say = lambda _: None) -> dict:
    """Re-distil ``draft`` (a transformers folder; default the prepared model's) against the target served at
    ``url`` (or several servers of it) on ``sample`` (prompt texts per domain); writes ``out/draft`` and
    ``out/draft.gguf``. Returns what was done, with the seconds of each stage."""
    from transformers import AutoTokenizer

    from agent.decoding.versions import weights_version
    from agent.kit.gguf import export_model
    from agent.kit.load import load_model
    from agent.kit.train import WindowSampler, train
    from agent.pretrained.draft import stream_array
    from agent.pretrained.shipped import save_draft

    seconds = {}
    began = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(model.hf)
    streams = live_streams(url, tokenizer, sample, new_tokens)
    seconds["answers"] = time.perf_counter() - began
    tokens = stream_array(streams)
    say(f"{len(streams)} sampled prompts answered by the new target ({tokens.size} tokens) in "
        f"{seconds['answers']:.0f} s; training the draft {steps} steps")
    mark = time.perf_counter()
    source = Path(draft or model.draft)
    student = load_model(source, device="cpu", dtype="float32")
    before = weights_version(student)
    sampler = WindowSampler({"live": tokens}, (("live", 1.0),), batch_size, min(seq_len, tokens.size - 2), seed)
    result = train(student, sampler, steps=steps, lr=lr, warmup=max(1, steps // 10), precision="auto",
                   threads=threads)
    seconds["train"] = time.perf_counter() - mark
    mark = time.perf_counter()
    folder, gguf = save_draft(student, Path(out) / "draft", Path(model.draft)), Path(out) / "draft.gguf"
    export_model(folder, gguf, dtype="f16", name=f"specwatch-{model.name}-draft", tokenizer_from=model.target_gguf)
    seconds["export"] = time.perf_counter() - mark
    return {"version": weights_version(student), "draft_version_before": before, "steps": steps,
            "loss": round(result.loss, 4), "prompts": {d: len(t) for d, t in sample.items()},
            "tokens": int(tokens.size), "folder": str(folder), "gguf": str(gguf),
            "seconds": {k: round(v, 1) for k, v in seconds.items()},
            "total_seconds": round(time.perf_counter() - began, 1)}
