"""vLLM v1's speculative-decoding counters.

vllm/v1/spec_decode/metrics.py (SpecDecodingProm) defines the counters ``vllm:spec_decode_num_drafts``,
``_num_draft_tokens``, ``_num_accepted_tokens`` and ``_num_accepted_tokens_per_pos`` (extra label
``position``, 0..K-1, one child per position from start-up), labelled ``model_name`` and ``engine``
(vllm/v1/metrics/loggers.py). prometheus-client exports each with the ``_total`` suffix and, outside
multiprocess mode, a ``_created`` sample. Step time: ``vllm:inter_token_latency_seconds`` (older releases:
``vllm:time_per_output_token_seconds``), observed for every request at every engine step, so the delta of
its ``_sum`` is the requests' summed decode time over the interval. ``vllm:prompt_tokens`` and
``vllm:generation_tokens`` going down also mark a restart (multiprocess mode has no ``_created``).
"""

from __future__ import annotations

from agent.scrape.pages.counts import PageError, SpecCounters
from agent.scrape.pages.page import Page, Series, ordered

NAME = "vllm"
TITLE = "vLLM"
PREFIX = "vllm:spec_decode_num_"
COUNTERS = ("drafts", "draft_tokens", "accepted_tokens", "accepted_tokens_per_pos")
WITNESSES = ("vllm:prompt_tokens_total", "vllm:generation_tokens_total")
STEP_TIME = ("vllm:inter_token_latency_seconds_sum", "vllm:time_per_output_token_seconds_sum")
FAMILY = "vllm:"
MISSING = (f"no vLLM speculative-decoding metrics ({PREFIX}*) on the page; is speculative decoding "
           "configured on the engine (--speculative-config)?")


def detect(page: Page) -> bool:
    return any(page.samples.get(PREFIX + name + "_total") for name in COUNTERS)


def read(page: Page) -> list[Series]:
    """One series per (model_name, engine); PageError when the four counters are not all there."""
    found = {name: page.counts(PREFIX + name + "_total") for name in COUNTERS[:3]}
    positions = page.positions(PREFIX + "accepted_tokens_per_pos_total", "position")
    present = [n for n in COUNTERS if (positions if n == "accepted_tokens_per_pos" else found[n])]
    if not present:
        raise PageError(MISSING)
    if len(present) < len(COUNTERS):
        missing = ", ".join(PREFIX + n for n in COUNTERS if n not in present)
        raise PageError(f"the page lacks {missing}; specwatch scrape needs vLLM v1's four counters")
    created = page.earliest([PREFIX + name + "_created" for name in COUNTERS], drop=("position",))
    seconds = next((s for s in (page.values(n) for n in STEP_TIME) if s), {})
    witness = page.witness(WITNESSES)
    out = []
    for key, drafts in sorted(found["drafts"].items()):
        labels = dict(key)
        where = f"model_name={labels.get('model_name', '')!r} engine={labels.get('engine', '')!r}"
        try:
            per_pos = ordered(positions[key], f"{PREFIX}accepted_tokens_per_pos of {where}")
            counters = SpecCounters(drafts, found["draft_tokens"][key], found["accepted_tokens"][key], per_pos,
                                    created.get(key), seconds.get(key), witness=witness.get(key, ()))
        except KeyError:
            raise PageError(f"counters of {where} are incomplete") from None
        if not per_pos:
            raise PageError(f"{PREFIX}accepted_tokens_per_pos of {where} has no positions")
        out.append(Series(NAME, key, labels.get("model_name") or None, counters))
    return out
