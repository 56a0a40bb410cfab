"""The pools a recommendation asks for, and each engine's configuration of each pool.

The pod's K serves every domain that is not routed elsewhere; each K a routed domain is worth (the
recommendation's routes: its own best goodput beats the pod's K by more than ``route_gain``) gets a pool of
its own (``specwatch proxy --upstream kN=URL``, ``off`` for K = 0). A speculating pool whose domains prefer
different K is a candidate for SGLang's adaptive steps (``--speculative-adaptive``, whose config lists the
``candidate_steps`` it moves between by measured acceptance); the other engines fix one K per pool.

Per engine (the draft stands for its path or id):
- vLLM: ``--speculative-config`` JSON with ``num_speculative_tokens`` and ``--per-request-spec-decode-metrics
  summary``, which the proxy reads per request (without it: pool-level records only).
- SGLang: the chain flags (``--speculative-num-steps K --speculative-eagle-topk 1
  --speculative-num-draft-tokens K+1``), plus the adaptive flags and their JSON where the pool adapts.
- TensorRT-LLM: the LLM API options' ``speculative_config`` with ``max_draft_len`` and a
  ``draft_len_schedule`` holding K up to ``MAX_BATCH``: the history has no batch size, so it measured no
  reason to draft less under load (the engine drafts nothing above the schedule's last batch size).
- llama.cpp: ``-md DRAFT --spec-type draft-simple --spec-draft-n-max K``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from agent.advice.engine_flags import DRAFT, flags
from agent.advice.recommend import Recommendation, pool_name

MAX_BATCH = 2048  # TensorRT-LLM's default max_batch_size (LLM API)


@dataclass(frozen=True)
class PoolPlan:
    """One pool: its proxy name, K, the domains it serves, whether they were routed there (a pool of their
    own), and the K it adapts between (SGLang; empty: fixed K)."""

    name: str
    lookahead: int
    domains: tuple[str, ...]
    own: bool
    adaptive: tuple[int, ...] = ()


@dataclass(frozen=True)
class PoolConfig:
    """An engine's configuration of one pool: its flags (or options) and files to write beside them."""

    flags: str
    files: tuple[tuple[str, str], ...] = ()


def plan(result: Recommendation) -> tuple[PoolPlan, ...]:
    """The pools ``result`` asks for: the pod's first, then one per routed K; () without a pod-wide K."""
    pod = result.pod
    if pod.lookahead is None:
        return ()
    routed = {r.domain: r.lookahead for r in pod.routes}
    groups: dict[int, list[str]] = {pod.lookahead: []}
    for d in result.domains:
        groups.setdefault(routed.get(d.domain, pod.lookahead), []).append(d.domain)
    best = {d.domain: d.lookahead for d in result.domains}
    out = []
    for k, names in groups.items():
        prefer = sorted({k, *(best[n] for n in names if best[n])}) if k else []
        out.append(PoolPlan(pool_name(k), k, tuple(names), k != pod.lookahead,
                            tuple(prefer) if len(prefer) > 1 else ()))
    return tuple(out)


def configure(engine: str, pool: PoolPlan, draft: str = DRAFT) -> PoolConfig:
    """``engine``'s configuration of ``pool`` (ValueError naming the engine when it is unknown)."""
    k = pool.lookahead
    if engine == "vllm" and k:
        return PoolConfig(f"{flags(engine, k, draft)} --per-request-spec-decode-metrics summary")
    if engine == "sglang" and pool.adaptive:
        name = f"adaptive-{pool.name}.json"
        return PoolConfig(f"{flags(engine, max(pool.adaptive), draft)} --speculative-adaptive "
                          f"--speculative-adaptive-config {name}",
                          ((name, json.dumps({"candidate_steps": list(pool.adaptive)})),))
    if engine == "trtllm" and k:
        return PoolConfig(f"speculative_config: {{decoding_type: DraftTarget, max_draft_len: {k}, "
                          f"speculative_model_dir: {draft}, draft_len_schedule: {{{MAX_BATCH}: {k}}}}}")
    return PoolConfig(flags(engine, k, draft))
