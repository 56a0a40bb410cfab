"""TensorRT-LLM's OpenAI-compatible server (``trtllm-serve``) behind the proxy.

Detected by its Prometheus page ``/prometheus/metrics`` (``trtllm_`` or ``trtllm:`` metrics; its ``/metrics``
is JSON). Target version: the model id of ``/v1/models``; the draft's is the pool's ``--draft-version``.

Its answers carry no per-request speculation counts: ``usage`` and, per choice, ``avg_decoded_tokens_per_iter``
(a mean of tokens per decoding iteration, not counts; tensorrt_llm/serve/postprocess_handlers.py). So a pool
without a draft records each request from ``usage.completion_tokens`` (streamed: the last chunk, sent with
``stream_options.include_usage``) and a speculating pool gets pool-level records from the counters of
``/prometheus/metrics`` (``trtllm_spec_decode_{drafted,accepted}_tokens_total{token_position}``, written with
``return_perf_metrics: true``; agent/proxy/engines/pool_level.py), never split across domains.
"""

from __future__ import annotations

from typing import Any

from agent.proxy.engines.base import Figures, Found, Missing, count, field
from agent.proxy.versions import models_id

NAME = "trtllm"
TITLE = "TensorRT-LLM"
MARKER = b'"usage"'
PROBES = ("/prometheus/metrics",)
PAGES = ("/v1/models",)
COUNTERS = "/prometheus/metrics"
MISSING = ("per-request speculation counts", "TensorRT-LLM reports none per request; set return_perf_metrics: "
                                             "true for the pool-level counters")


def detect(probes: dict[str, Any]) -> bool:
    page = probes.get("/prometheus/metrics")
    return isinstance(page, str) and ("trtllm_" in page or "trtllm:" in page)


def versions(pages: dict[str, Any]) -> Found:
    return Found(models_id(pages.get("/v1/models")))


def startup(pages: dict[str, Any], lookahead: int) -> tuple[tuple[str, dict | None], ...]:
    return ()  # nothing to ask: known without a request


def started(answers: dict[str, Any], lookahead: int) -> bool:
    """A speculating pool's answers never carry the counts: pool-level from the start."""
    return lookahead == 0


def figures(answer: dict, lookahead: int) -> Figures | None:
    if "error" in answer or answer.get("object") == "error":
        return None
    emitted = field(answer, "usage", "completion_tokens")
    if emitted is None and "choices" in answer and not lookahead:
        raise Missing("usage", "a streamed request without stream_options.include_usage")
    if not count(emitted) or emitted < 1:
        return None
    if lookahead:
        raise Missing(*MISSING)
    return Figures(emitted, steps=emitted)
