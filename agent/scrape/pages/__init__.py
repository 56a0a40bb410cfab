"""Readers of serving engines' Prometheus pages: each engine's speculative-decoding metrics as counts.

One module per engine (``vllm``, ``llamacpp``, ``sglang``, ``trtllm``), each with ``detect(page)`` and
``read(page) -> list[Series]``; ``read_page`` parses a page once and uses every reader whose metrics are on
it, so a page is read without being told which engine wrote it (a gateway's page may carry several).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from agent.scrape.pages import llamacpp, sglang, trtllm, vllm
from agent.scrape.pages.counts import PageError, SpecCounters
from agent.scrape.pages.page import Page, Series

READERS = (vllm, llamacpp, sglang, trtllm)


def detect(page: Page) -> list:
    """The reader modules whose speculative-decoding metrics are on ``page``; PageError when none are,
    saying what is missing for the engine whose other metrics are there."""
    found = [reader for reader in READERS if reader.detect(page)]
    if found:
        return found
    for reader in READERS:
        if page.has(reader.FAMILY):
            raise PageError(reader.MISSING)
    names = ", ".join(reader.TITLE for reader in READERS)
    raise PageError(f"no speculative-decoding metrics of any engine specwatch reads ({names}) on the page")


def read_page(text: str) -> list[Series]:
    """Every engine series on a page. A series without a start time of its own takes the page's
    ``process_start_time_seconds``, so a restart shows even where counters carry no ``_created``."""
    page = Page.parse(text)
    start = page.start_time()
    out = []
    for reader in detect(page):
        for series in reader.read(page):
            if series.counters.created is None and start is not None:
                series = replace(series, counters=replace(series.counters, created=start))
            out.append(series)
    return out


def identity(engine: str) -> tuple[str, Callable[[dict], str | None]] | None:
    """(path, parser) of the endpoint naming the served model, for engines whose page names none."""
    reader = next((r for r in READERS if r.NAME == engine), None)
    path = getattr(reader, "IDENTITY", None)
    return (path, reader.identity) if path else None


__all__ = ["read_page", "detect", "identity", "Page", "Series", "SpecCounters", "PageError", "READERS"]
