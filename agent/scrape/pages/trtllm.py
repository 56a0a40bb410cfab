"""TensorRT-LLM's per-position speculative-decoding counters (``trtllm-serve``).

tensorrt_llm/metrics/collector.py (MetricsCollector) defines ``trtllm_spec_decode_drafted_tokens_total`` and
``trtllm_spec_decode_accepted_tokens_total``, labelled like every metric of the server (``model_name``,
``engine_type``) plus ``token_position`` (0-based). ``log_request_metrics_dict`` adds a finished request's
per-position counts (``return_perf_metrics``), creating a child only when its count is above zero, so
positions never accepted are absent. Read as: drafted[i] = verification passes that drafted a token at
position i, accepted[i] = passes whose token at i was accepted; so drafts = drafted[0], draft tokens =
sum(drafted), accepted tokens = sum(accepted). The iteration counters ``trtllm_spec_decode_num_draft_tokens``
/ ``_num_accepted_tokens`` carry no count of drafts and are not read. Step time:
``trtllm_request_decode_time_seconds`` (per finished request, like the counts), the delta of its ``_sum``;
the prompt and generation token counters going down also mark a restart.
Older releases used the prefix ``trtllm:``; both are read.
"""

from __future__ import annotations

from agent.scrape.pages.counts import PageError, SpecCounters
from agent.scrape.pages.page import Page, Series, ordered

NAME = "trtllm"
TITLE = "TensorRT-LLM"
PREFIXES = ("trtllm_", "trtllm:")
POSITION = "token_position"
FAMILY = "trtllm"
MISSING = ("no TensorRT-LLM per-position speculative-decoding counters (trtllm_spec_decode_drafted_tokens_total"
           "{token_position}) on the page; they are written for finished requests when the server runs with "
           "return_perf_metrics: true")


def _prefix(page: Page) -> str | None:
    return next((p for p in PREFIXES if page.samples.get(p + "spec_decode_drafted_tokens_total")), None)


def detect(page: Page) -> bool:
    return _prefix(page) is not None


def read(page: Page) -> list[Series]:
    """One series per label set (model_name, engine_type, ...)."""
    prefix = _prefix(page)
    if prefix is None:
        raise PageError(MISSING)
    drafted = page.positions(prefix + "spec_decode_drafted_tokens_total", POSITION)
    accepted = page.positions(prefix + "spec_decode_accepted_tokens_total", POSITION)
    created = page.earliest([prefix + "spec_decode_drafted_tokens_created",
                             prefix + "spec_decode_accepted_tokens_created"], drop=(POSITION,))
    seconds = page.values(prefix + "request_decode_time_seconds_sum")
    witness = page.witness([prefix + "prompt_tokens_total", prefix + "generation_tokens_total"])
    out = []
    for key, by_position in sorted(drafted.items()):
        where = f"{prefix}spec_decode_drafted_tokens of {dict(key)}"
        tokens = ordered(by_position, where)
        per_pos = ordered(accepted.get(key, {}), f"{prefix}spec_decode_accepted_tokens of {dict(key)}",
                          width=len(tokens))
        if any(a > d for a, d in zip(per_pos, tokens)):
            raise PageError(f"{where}: more tokens accepted than drafted at a position")
        counters = SpecCounters(tokens[0] if tokens else 0, sum(tokens), sum(per_pos), per_pos, created.get(key),
                                seconds.get(key), witness=witness.get(key, ()))
        out.append(Series(NAME, key, dict(key).get("model_name") or None, counters))
    return out
