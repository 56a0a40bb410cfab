"""vLLM's OpenAI-compatible server (``vllm serve``) behind the proxy.

Detected by ``/version`` (``{"version": "..."}``) with ``/v1/models`` owned by ``vllm``. The target version is
the served model id of ``/v1/models``; vLLM names no draft, so the draft version is the pool's
``--draft-version``.

Per request (``--per-request-spec-decode-metrics summary|detailed``, docs/features/speculative_decoding/
acceptance_metrics.md of vllm-project/vllm): ``metrics.speculative_decoding`` of a completion or chat answer
with ``n == 1`` (streamed: the final usage chunk, sent with ``stream_options.include_usage`` or
``--enable-force-include-usage``): ``num_spec_steps`` verification steps that had drafts,
``num_draft_tokens``, ``num_accepted_draft_tokens`` (bonus tokens excluded), ``num_spec_tokens`` (K), and
``acceptance_histogram`` (entry j: steps that accepted exactly j). Emitted tokens are ``usage.completion_tokens``;
steps are emitted - accepted (the prefill's token and steps without drafts count as steps, as llama.cpp's do),
never fewer than ``num_spec_steps``. Time: ``metrics.time_to_first_token_ms + generation_time_ms`` with
``--enable-per-request-metrics``, else the proxy's wall time of the request. Without the flag a speculating pool
gets pool-level records from ``vllm:spec_decode_*`` counters on ``/metrics`` (agent/proxy/engines/pool_level.py);
the start check (``startup``, ``started``) finds the flag off when the pool comes up, not at its first answer.
"""

from __future__ import annotations

from typing import Any

from agent.proxy.engines.base import Figures, Found, Missing, count, field, number, per_position
from agent.proxy.versions import models_id
from specwatch_core.records import RecordError

NAME = "vllm"
TITLE = "vLLM"
MARKER = b'"usage"'
PROBES = ("/version", "/v1/models")
PAGES = ("/v1/models",)
COUNTERS = "/metrics"
FLAG = "start vLLM with --per-request-spec-decode-metrics summary"
MISSING = ("metrics.speculative_decoding", FLAG)
# The start check: vLLM's configuration where the server shows it (only with VLLM_SERVER_DEV_MODE=1), else a
# 1-token completion. With the flag on, every n == 1 answer of a speculating server carries
# metrics.speculative_decoding, all zeros when nothing was drafted (as a 1-token answer: the prefill emits it);
# without the flag, metrics is null or lacks it.
SERVER_INFO = "/server_info?config_format=json"
PROBE = "/v1/completions"
LEVELS = ("summary", "detailed")


def detect(probes: dict[str, Any]) -> bool:
    version = probes.get("/version")
    owner = field(probes.get("/v1/models"), "data", 0, "owned_by")
    return isinstance(version, dict) and isinstance(version.get("version"), str) and owner in (None, "vllm")


def versions(pages: dict[str, Any]) -> Found:
    return Found(models_id(pages.get("/v1/models")))


def startup(pages: dict[str, Any], lookahead: int) -> tuple[tuple[str, dict | None], ...]:
    """What the start check asks a speculating pool, in order: its configuration, then a 1-token completion
    to the served model."""
    if lookahead == 0:
        return ()
    # include_metrics: releases whose timing metrics a request must ask for (per_request_metrics.md at
    # e4deb7cd); others ignore a field they do not know
    body: dict[str, Any] = {"prompt": "Hi", "max_tokens": 1, "temperature": 0, "n": 1, "stream": False,
                            "include_metrics": True}
    model = field(pages.get("/v1/models"), "data", 0, "id")
    if isinstance(model, str) and model:
        body["model"] = model
    return (SERVER_INFO, None), (PROBE, body)


def started(answers: dict[str, Any], lookahead: int) -> bool | None:
    """Whether the pool's answers carry metrics.speculative_decoding: from the flag in its configuration
    (``observability_config.per_request_spec_decode_metrics``), else from the probe's answer; None when
    neither told."""
    if lookahead == 0:
        return True  # no draft: nothing to carry
    level = field(answers.get(SERVER_INFO), "vllm_config", "observability_config",
                  "per_request_spec_decode_metrics")
    if isinstance(level, str):
        return level in LEVELS
    probe = answers.get(PROBE)
    if not isinstance(probe, dict) or not count(field(probe, "usage", "completion_tokens")):
        return None
    return isinstance(field(probe, "metrics", "speculative_decoding"), dict)


def figures(answer: dict, lookahead: int) -> Figures | None:
    """The request's figures; Missing when a speculating pool's answer lacks them; None when the answer has no
    usage (an error, an answer cut short) or several sequences (``n`` > 1: vLLM reports no figures for them);
    RecordError naming the field when a figure is not a count."""
    if "error" in answer or answer.get("object") == "error" or len(answer.get("choices") or ()) > 1:
        return None
    emitted = field(answer, "usage", "completion_tokens")
    if emitted is None and "choices" in answer:
        raise Missing("usage", "a streamed request without stream_options.include_usage: start vLLM with "
                               "--enable-force-include-usage")
    if not count(emitted) or emitted < 1:
        return None
    metrics = answer.get("metrics")
    seconds = _seconds(metrics)
    spec = field(metrics, "speculative_decoding")
    if not isinstance(spec, dict):
        if lookahead == 0:
            return Figures(emitted, steps=emitted, seconds=seconds)
        raise Missing(*MISSING)
    steps, drafted, accepted = (spec.get(k) for k in ("num_spec_steps", "num_draft_tokens",
                                                      "num_accepted_draft_tokens"))
    for name, value in (("num_spec_steps", steps), ("num_draft_tokens", drafted),
                        ("num_accepted_draft_tokens", accepted)):
        if not count(value):
            raise RecordError(f"metrics.speculative_decoding.{name}", f"must be a whole count, got {value!r}")
    histogram = spec.get("acceptance_histogram")
    whole = isinstance(histogram, list) and all(map(count, histogram))
    k = spec.get("num_spec_tokens")
    return Figures(emitted, drafted, accepted, min(emitted, max(steps, emitted - accepted)), seconds,
                   per_position(histogram) if whole else None, k if count(k) else None,
                   sum(histogram) if whole else None)


def _seconds(metrics: Any) -> float | None:
    first, rest = field(metrics, "time_to_first_token_ms"), field(metrics, "generation_time_ms")
    return (first + rest) / 1000.0 if number(first) and number(rest) and first >= 0 and rest >= 0 else None
