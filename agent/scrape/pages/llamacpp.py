"""llama.cpp server's speculative-decoding counters (``llama-server --metrics``).

tools/server/server-task.cpp (``server_task_result_metrics::to_metrics``, build b11434) writes the counters
``llamacpp:spec_decode_num_drafts_total`` (verification steps), ``_num_draft_tokens_total`` and
``_num_accepted_tokens_total``, and, once something was drafted, the labelled counter
``llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0".."K-1"}`` (one per position up to
``--spec-draft-n-max``). No other labels and no ``_created``. tools/server/server-context.cpp adds a
request's counts when it finishes (``metrics_on_prediction``): a page is never caught mid-update, and a long
request counts in the scrape after it ends. Step time: ``llamacpp:tokens_predicted_seconds_total``, the
finished requests' generation time, added at the same moment. A restart shows as any llamacpp counter going
down. The page names no model: the scraper asks ``/v1/models`` (``IDENTITY``).
"""

from __future__ import annotations

import posixpath

from agent.scrape.pages.counts import PageError, SpecCounters
from agent.scrape.pages.page import Page, Series, ordered

NAME = "llamacpp"
TITLE = "llama.cpp"
PREFIX = "llamacpp:spec_decode_num_"
FAMILY = "llamacpp:"
MISSING = (f"no llama.cpp speculative-decoding counters ({PREFIX}*) on the page; start llama-server with "
           "--metrics and a draft (-md DRAFT --spec-type draft-simple)")
WITNESSES = ("llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total", "llamacpp:n_decode_total")
IDENTITY = "/v1/models"


def detect(page: Page) -> bool:
    return page.has(PREFIX)


def read(page: Page) -> list[Series]:
    """The server's one series. Builds without the per-position counter give ``per_pos`` None."""
    totals = {}
    for name in ("drafts", "draft_tokens", "accepted_tokens"):
        values = page.counts(f"{PREFIX}{name}_total")
        if () not in values:
            raise PageError(f"the page lacks {PREFIX}{name}_total (or labels it); {MISSING}")
        totals[name] = values[()]
    positions = page.positions(PREFIX + "accepted_tokens_per_pos_total", "position").get(())
    if positions:
        per_pos = ordered(positions, PREFIX + "accepted_tokens_per_pos")
    else:
        per_pos = () if totals["drafts"] == 0 else None
    witness = page.witness(WITNESSES).get((), ())
    seconds = page.values("llamacpp:tokens_predicted_seconds_total").get(())
    counters = SpecCounters(totals["drafts"], totals["draft_tokens"], totals["accepted_tokens"], per_pos,
                            seconds=seconds, witness=witness)
    return [Series(NAME, (), None, counters)]


def identity(answer: dict) -> str | None:
    """The served model from a ``/v1/models`` answer: its id, the file name when the id is a path."""
    try:
        model = str(answer["data"][0]["id"])
    except (KeyError, IndexError, TypeError):
        return None
    return posixpath.basename(model) if "/" in model else model or None
