"""SGLang's server (``sglang.launch_server``) behind the proxy.

Detected by ``/model_info`` (``/get_model_info`` before releases deprecated it: ``model_path``,
``is_generation``). Target version: its ``model_path``; draft and draft length from ``/server_info`` (else
``/get_server_info``) (``speculative_draft_model_path``; a verification pass checks
``speculative_num_draft_tokens`` tokens, the root and K = that - 1 drafted ones; no ``speculative_algorithm``:
no speculation).

Per request SGLang's ``meta_info`` (native ``/generate``: the answer's; streamed: the last event's, each event
carries the running totals; OpenAI routes: ``choices[0].meta_info`` when the request sets
``return_meta_info``) holds ``completion_tokens``, ``e2e_latency`` (seconds) and, once a verification pass ran,
``spec_verify_ct`` with the accepted and drafted token counts, named ``spec_num_correct_drafts`` /
``spec_num_proposed_drafts`` in current releases (drafted = verify passes x (num_draft_tokens - 1)),
``spec_accepted_drafts`` / ``spec_proposed_drafts`` and ``spec_accept_token_num`` / ``spec_draft_token_num``
in earlier ones, and a histogram of accepted counts per pass (``spec_correct_drafts_histogram``, earlier
``spec_accept_histogram``). Steps: emitted - accepted (the prefill's token counts as one), never fewer than
the verification passes.
"""

from __future__ import annotations

from typing import Any

from agent.proxy.engines.base import Figures, Found, Missing, count, field, number, per_position
from agent.proxy.versions import clip, find
from specwatch_core.records import RecordError

NAME = "sglang"
TITLE = "SGLang"
MARKER = b'"meta_info"'
PROBES = ("/model_info", "/get_model_info")
PAGES = ("/model_info", "/server_info")
FALLBACK = {"/model_info": "/get_model_info", "/server_info": "/get_server_info"}  # releases before the rename
COUNTERS = None  # its page has gauges, not counters: no pool-level records
ACCEPTED = ("spec_num_correct_drafts", "spec_accepted_drafts", "spec_accept_token_num")
DRAFTED = ("spec_num_proposed_drafts", "spec_proposed_drafts", "spec_draft_token_num")
HISTOGRAM = ("spec_correct_drafts_histogram", "spec_accept_histogram")
MISSING = ("meta_info", "send return_meta_info: true on OpenAI routes, or use /generate")


def detect(probes: dict[str, Any]) -> bool:
    info = probes.get("/model_info") or probes.get("/get_model_info")
    return isinstance(info, dict) and isinstance(info.get("model_path"), str) and "is_generation" in info


def versions(pages: dict[str, Any]) -> Found:
    model = field(pages.get("/model_info"), "model_path")
    server = pages.get("/server_info")
    algorithm = find(server, ("speculative_algorithm",))
    draft = find(server, ("speculative_draft_model_path",))
    tokens = find(server, ("speculative_num_draft_tokens",))
    speculates = None if not isinstance(server, dict) else bool(algorithm)
    return Found(clip(model) if isinstance(model, str) and model else None,
                 draft if isinstance(draft, str) and draft else None,
                 tokens - 1 if speculates and count(tokens) and tokens >= 1 else (0 if speculates is False else None),
                 speculates)


def startup(pages: dict[str, Any], lookahead: int) -> tuple[tuple[str, dict | None], ...]:
    return ()


def started(answers: dict[str, Any], lookahead: int) -> bool:
    """No server flag gates meta_info: /generate always carries it (its OpenAI routes when a request asks)."""
    return True


def figures(answer: dict, lookahead: int) -> Figures | None:
    if "error" in answer:
        return None
    meta = answer.get("meta_info", field(answer, "choices", 0, "meta_info"))
    if not isinstance(meta, dict):
        if "choices" in answer or "text" in answer:
            raise Missing(*MISSING)
        return None
    emitted = meta.get("completion_tokens")
    if not count(emitted) or emitted < 1:
        return None
    latency = meta.get("e2e_latency")
    seconds = float(latency) if number(latency) and latency >= 0 else None
    verify = meta.get("spec_verify_ct")
    if verify is None or verify == 0:
        # SGLang writes its spec_* fields only once a verification pass ran (spec_verify_ct > 0; releases
        # before wrote 0): none is a request whose every token came from a plain step (a 1-token answer)
        return Figures(emitted, steps=emitted, seconds=seconds)
    if not count(verify):
        raise RecordError("meta_info.spec_verify_ct", f"must be a whole count, got {verify!r}")
    accepted = next((meta[k] for k in ACCEPTED if k in meta), None)
    drafted = next((meta[k] for k in DRAFTED if k in meta), None)
    if not (count(accepted) and count(drafted)):
        raise Missing(f"meta_info.{ACCEPTED[0]}", f"with {DRAFTED[0]}: counts from an SGLang release that "
                                                  "reports them")
    histogram = next((meta[k] for k in HISTOGRAM if isinstance(meta.get(k), list)), None)
    whole = bool(histogram) and all(map(count, histogram))
    return Figures(emitted, drafted, accepted, min(emitted, max(verify, emitted - accepted)), seconds,
                   per_position(histogram) if whole else None, verified=sum(histogram) if whole else None)
