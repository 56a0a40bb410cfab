"""A lookahead K as each serving engine's own start-up flags (every engine fixes its draft length at start).

K = 0 means serving without speculation: the engine's flags with the draft left out. ``draft`` stands for
the draft model's path or id (the store knows only its version hash); for llama.cpp it may instead name an
n-gram kind of self-speculation (``ngram-mod``, ``ngram-simple``, ``ngram-map-k``, ``ngram-cache``): then K
is the cap on what a step drafts and no draft model is loaded.
"""

from __future__ import annotations

import json

ENGINES = ("llamacpp", "vllm", "sglang", "trtllm")
NAMES = {"llamacpp": "llama.cpp (llama-server)", "vllm": "vLLM (vllm serve)",
         "sglang": "SGLang (sglang.launch_server)", "trtllm": "TensorRT-LLM (trtllm-serve, LLM API options YAML)"}
DRAFT = "DRAFT"
NGRAM = ("ngram-mod", "ngram-simple", "ngram-map-k", "ngram-cache")  # llama.cpp's, agent/engines/llamacpp.py


def flags(engine: str, k: int, draft: str = DRAFT) -> str:
    """The start-up flags (for TensorRT-LLM: the options YAML) that serve with lookahead ``k``."""
    if engine not in ENGINES:
        raise ValueError(f"engine: one of {', '.join(ENGINES)}, got {engine!r}")
    if type(k) is not int or k < 0:
        raise ValueError(f"k: a non-negative integer, got {k!r}")
    if engine == "llamacpp":
        if not k:
            return "no -md, --spec-type or --spec-draft-n-max (serve without a draft)"
        if draft in NGRAM:
            from agent.engines.llamacpp import speculation_flags

            return " ".join(speculation_flags(draft, k))
        # --spec-type draft-simple is needed: without it build b11434 drafts nothing
        return f"-md {draft} --spec-type draft-simple --spec-draft-n-max {k}"
    if engine == "vllm":
        config = {"method": "draft_model", "model": draft, "num_speculative_tokens": k}
        return f"--speculative-config '{json.dumps(config)}'" if k else "no --speculative-config"
    if engine == "sglang":
        # a chain (top-k 1) of K drafted tokens verifies K + 1 tokens: the root and the K drafted
        return (f"--speculative-algorithm STANDALONE --speculative-draft-model-path {draft} "
                f"--speculative-num-steps {k} --speculative-eagle-topk 1 --speculative-num-draft-tokens {k + 1}"
                if k else "no --speculative-* flags")
    return (f"speculative_config: {{decoding_type: DraftTarget, max_draft_len: {k}, "
            f"speculative_model_dir: {draft}}}" if k else "no speculative_config")
