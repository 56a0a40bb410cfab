"""Benchmark: what target v2 of the real model (SmolLM2-135M-Instruct plus the LoRA adapter of
``specwatch models pretrained --lora-v2``) changes, per domain, against v1 (the model as its package ships it).

Both served by llama-server from the same Q4_1 GGUF, v2 with ``--lora`` (the adapter's GGUF); or, with
``--engine transformers``, both in-process from the float32 checkpoint (v2 with the adapter merged: no
llama-server needed, slower). Per domain of the workload (agent/workload/: code, edit, extract, chat, json,
copy, and ``logs``, the domain v2 was trained to change), a seeded sample of --prompts held-out prompts:
greedy answers of up to --tokens tokens from each version; how many answers changed and how many leading tokens they still share; the
distilled draft's per-token acceptance against each version's answers (agent/pretrained/v2_compare.py); for
``logs``, how many v2 answers are the line in the new format exactly. The target versions the proxy reads off
each server (/props + /lora-adapters, hashed) are printed too.
Goals: logs changes (most answers) and the draft's acceptance there drops; every other domain barely changes
(the draft's acceptance within 0.03 of v1's).
Not a test: prints a table and writes bench/results/target_v2.json.

    python bench/target_v2.py [--prompts 40] [--tokens 64] [--threads 2] [--engine llama.cpp|transformers]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.engines.llamacpp import LlamaServer, LlamaServerConfig  # noqa: E402
from agent.pretrained import logs, v2_compare  # noqa: E402
from agent.pretrained.prepare import Prepared  # noqa: E402
from agent.workload import prompts as workload  # noqa: E402
from agent.proxy.engines.llamacpp import lora_adapters  # noqa: E402
from agent.proxy.versions import FileVersions, with_adapters  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "target_v2.json"
DOMAINS = ("code", "edit", "extract", "chat", "json", "copy", logs.DOMAIN)


def sample(domain: str, n: int, seed: int = 0) -> list:
    held = workload.load(domain, "heldout")
    return random.Random(seed).sample(held, min(n, len(held)))


def in_process(model: Prepared, tokenizer, prompts, tokens: int, threads: int, say) -> tuple:
    """(v1 answers, v1 version, seconds, v2 answers, v2 version, seconds) from transformers."""
    import torch

    from agent.decoding.versions import weights_version
    from agent.kit.load import load_model
    from agent.pretrained.target_v2 import load_v2

    torch.set_num_threads(threads)
    out = []
    for label, load in (("v1", lambda: load_model(model.hf, device="cpu", dtype="float32")),
                        ("v2", lambda: load_v2(model))):
        began = time.perf_counter()
        target = load()
        version = weights_version(target)
        say(f"  {label} {version} (transformers): {len(prompts)} prompts")
        out += [v2_compare.local_answers(target, tokenizer, prompts, tokens), version, time.perf_counter() - began]
    return tuple(out)


def served(config: LlamaServerConfig, tokenizer, prompts, tokens: int, say) -> tuple[list, str, float]:
    """(answers, the target version the proxy would read, seconds) from one llama-server."""
    files = FileVersions()
    began = time.perf_counter()
    with LlamaServer(config) as server:
        props = server.props()
        adapters = lora_adapters(httpx.get(server.base_url + "/lora-adapters", timeout=10).json())
        version = with_adapters(files.of(props["model_path"]), adapters, files)
        say(f"  {version}: {len(prompts)} prompts")
        found = v2_compare.answers(server.base_url, tokenizer, prompts, tokens, concurrency=config.parallel)
    return found, version, time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", default="smollm2-135m")
    parser.add_argument("--prompts", type=int, default=40, help="held-out prompts per domain")
    parser.add_argument("--tokens", type=int, default=64, help="the new format's lines take ~55 tokens")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--engine", choices=("llama.cpp", "transformers"), default="llama.cpp")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    from transformers import AutoTokenizer

    from agent.kit.load import load_model

    console = Console()
    model = Prepared.read(args.name)
    if model.lora_gguf is None:
        sys.exit(f"{args.name}: no target v2; run: specwatch models pretrained --lora-v2")
    tokenizer = AutoTokenizer.from_pretrained(model.hf)
    prompts = [p for d in DOMAINS for p in sample(d, args.prompts)]
    # One slot, one request at a time: greedy answers on quantized weights can flip at a near tie when the
    # batch shape changes, which would count as a change v2 did not make.
    base = dict(model=model.target_gguf, ctx_size=2048, parallel=1, threads=args.threads)
    say = lambda line: console.print(line, highlight=False)  # noqa: E731
    if args.engine == "transformers":
        v1, v1_version, v1_seconds, v2, v2_version, v2_seconds = in_process(model, tokenizer, prompts, args.tokens,
                                                                            args.threads, say)
    else:
        v1, v1_version, v1_seconds = served(LlamaServerConfig(**base), tokenizer, prompts, args.tokens, say)
        v2, v2_version, v2_seconds = served(LlamaServerConfig(**base, lora=model.lora_gguf), tokenizer, prompts,
                                            args.tokens, say)
    draft = load_model(model.draft, device="cpu", dtype="float32") if model.draft else None
    rows = v2_compare.summarise(v1, v2, draft)
    logs_v2 = [a for a in v2 if a.prompt.domain == "logs"]
    texts = [(tokenizer.decode(a.answer, skip_special_tokens=True).strip(), logs.rewrite(logs.line_of(a.prompt)))
             for a in logs_v2]
    rows["logs"]["v2_new_format_start"] = sum(t.startswith("severity=") for t, _ in texts)
    rows["logs"]["v2_new_format_exact"] = sum(t == want for t, want in texts)
    examples = {d: {"prompt": a.prompt.text, "v1": tokenizer.decode(a.answer, skip_special_tokens=True),
                    "v2": tokenizer.decode(b.answer, skip_special_tokens=True)}
                for d in DOMAINS for a, b in zip(v1, v2) if a.prompt.domain == d and a.answer != b.answer}
    table = Table(title=f"target v1 vs v2 ({args.prompts} held-out prompts a domain, {args.tokens} tokens, greedy, "
                        f"{args.engine})")
    for column in ("domain", "prompts", "answers changed", "shared prefix (tokens)", "draft acc. v1",
                   "draft acc. v2", "v2 new format: starts, exact"):
        table.add_column(column)
    for d in DOMAINS:
        r = rows[d]
        table.add_row(d, str(r["prompts"]), f"{r['changed']} ({r['changed_share']:.0%})",
                      f"{r['shared_prefix_tokens']} of {r['v1_tokens']}", str(r.get("draft_acceptance_v1")),
                      str(r.get("draft_acceptance_v2")),
                      f"{r['v2_new_format_start']}, {r['v2_new_format_exact']}" if d == "logs" else "")
    console.print(table)
    out = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": platform.machine(),
           "model": args.name, "engine": args.engine, "versions": {"v1": v1_version, "v2": v2_version},
           "adapter": model.lora_version, "draft": model.draft_version,
           "training": json.loads((model.lora / "training.json").read_text()) if model.lora else None,
           "prompts_per_domain": args.prompts, "tokens": args.tokens,
           "seconds": {"v1": round(v1_seconds, 1), "v2": round(v2_seconds, 1)}, "domains": rows,
           "changed_examples": examples}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    console.print(f"versions: v1 {v1_version}\n          v2 {v2_version}\nwrote {args.out}")


if __name__ == "__main__":
    main()
