"""vLLM's speculative-decoding counters keyed as before (model_name, engine); the reader itself is
agent/engine_pages/vllm.py, used with the other engines' readers by ``specwatch scrape``."""

from __future__ import annotations

from agent.engine_pages import vllm
from agent.engine_pages.counts import PageError, SpecCounters
from agent.engine_pages.page import Page

EngineKey = tuple[str, str]  # (model_name, engine)


def parse_page(text: str) -> dict[EngineKey, SpecCounters]:
    """Each vLLM engine's counters on a page; PageError when they are missing or broken."""
    return {(s.label("model_name") or "", s.label("engine") or ""): s.counters
            for s in vllm.read(Page.parse(text))}


__all__ = ["parse_page", "PageError", "SpecCounters", "EngineKey"]
