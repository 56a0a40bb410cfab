"""Engine adapters of the proxy: one module per engine (``llamacpp``, ``vllm``, ``sglang``, ``trtllm``), each
keeping the contract of ``base`` (detect the engine from its pages, read its versions, turn an answer into the
request's figures, say how the start check learns whether its answers will carry them); ``pool_level`` makes
pool-level records from an engine's counters where its answers carry no per-request figures.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from agent.proxy.engines import llamacpp, sglang, trtllm, vllm

# In the order detection tries them: the most specific pages first; llama.cpp is the default.
ADAPTERS: tuple[ModuleType, ...] = (llamacpp, sglang, trtllm, vllm)
BY_NAME = {a.NAME: a for a in ADAPTERS}
NAMES = tuple(BY_NAME)
PROBES = tuple(dict.fromkeys(path for a in ADAPTERS for path in a.PROBES))
DEFAULT = llamacpp


def detect(probes: dict[str, Any]) -> ModuleType | None:
    """The adapter whose engine answered ``probes`` (path -> parsed JSON, page text or None), or None."""
    return next((a for a in ADAPTERS if a.detect(probes)), None)


def adapter(name: str) -> ModuleType:
    """The adapter named ``name``; ValueError naming the engines otherwise."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"engine: one of {', '.join(NAMES)}, got {name!r}") from None
