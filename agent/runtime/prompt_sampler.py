"""Opt-in sampling of live traffic for re-distilling a stale draft (Online Speculative Decoding, arXiv
2310.07177: keep distilling the draft on the queries it actually serves).

Nothing is kept unless sampling was switched on. Per domain, a seeded reservoir (Vitter's algorithm R) of at
most ``cap`` items keeps a uniform sample of everything offered since the last ``reset``; memory is bounded
by ``cap`` x domains x the longest item. An item is the prompt's token ids followed by the target's output:
data on the path the target actually takes, as DistillSpec (arXiv 2310.08461) recommends, without
re-generating it; or a prompt's text, as `specwatch serve` and `specwatch proxy` keep it for `specwatch
guard` (``sample_prompts``), which lets the new target continue each prompt itself. ``lines`` writes the
sample in the JSON lines `specwatch guard --prompts` reads.
"""

from __future__ import annotations

import json
import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass

Item = list[int] | str
NDJSON = "application/x-ndjson"
OFF = "sampling is off: set sample_prompts (prompts kept per domain)"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SamplerConfig:
    rate: float = 1.0  # share of offered requests considered at all
    cap: int = 64  # per domain
    max_tokens: int = 4096  # per item: longer prompts keep their tail
    max_chars: int = 16_384  # per text item: longer prompts keep their tail

    def __post_init__(self) -> None:
        if not isinstance(self.rate, (int, float)) or not 0.0 < self.rate <= 1.0:
            raise ValueError(f"rate: must be in (0, 1], got {self.rate!r}")
        for name in ("cap", "max_tokens", "max_chars"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"{name}: must be a positive integer, got {value!r}")


class PromptSampler:
    """Thread-safe per-domain reservoirs of (prompt + output) token ids."""

    def __init__(self, config: SamplerConfig | None = None, seed: int | None = None):
        self.config = config or SamplerConfig()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._kept: dict[str, list[Item]] = {}
        self._seen: dict[str, int] = {}

    def offer(self, domain: str, prompt: Item | Callable[[], Item | None], output: list[int] = ()) -> bool:
        """Consider one request (``prompt``: token ids, then ``output``'s; or text); True if it is (for now)
        in the sample. ``prompt`` may be a function giving it (None: nothing to keep), called only when the
        request takes a place: the proxy parses a request body only for the few the sample keeps."""
        cfg = self.config
        with self._lock:
            if self._rng.random() >= cfg.rate:
                return False
            seen = self._seen[domain] = self._seen.get(domain, 0) + 1
            kept = self._kept.setdefault(domain, [])
            slot = len(kept) if len(kept) < cfg.cap else self._rng.randrange(seen)
            if slot >= cfg.cap:
                return False
            item = prompt() if callable(prompt) else prompt
            if item is None:
                return False
            if slot == len(kept):
                kept.append(_item(item, output, cfg))
            else:
                kept[slot] = _item(item, output, cfg)
            return True

    def sample(self, domain: str | None = None) -> list[Item]:
        """The items kept for ``domain`` (every domain's when None)."""
        with self._lock:
            if domain is not None:
                return [_copy(x) for x in self._kept.get(domain, [])]
            return [_copy(x) for items in self._kept.values() for x in items]

    def lines(self) -> str:
        """The sample as JSON lines, one ``{"domain", "text"}`` or ``{"domain", "ids"}`` per item, domains in
        order: what `specwatch guard --prompts` reads."""
        with self._lock:
            kept = [(d, _copy(x)) for d in sorted(self._kept) for x in self._kept[d]]
        return "".join(json.dumps({"domain": d, "text" if isinstance(x, str) else "ids": x}, ensure_ascii=False)
                       + "\n" for d, x in kept)

    def counts(self) -> dict[str, tuple[int, int]]:
        """Per domain: (kept, offered and considered)."""
        with self._lock:
            return {d: (len(self._kept[d]), self._seen[d]) for d in self._kept}

    def reset(self) -> None:
        with self._lock:
            self._kept.clear()
            self._seen.clear()


def _item(prompt: Item, output: list[int], config: SamplerConfig) -> Item:
    """What is kept of a request: its last ``max_tokens`` tokens, prompt then output; or its text's last
    ``max_chars`` characters."""
    if isinstance(prompt, str):
        return prompt[-config.max_chars:]
    return (list(prompt) + list(output))[-config.max_tokens:]


def _copy(item: Item) -> Item:
    return item if isinstance(item, str) else list(item)


def live_sample(cap: int, token: str | None, route: str) -> PromptSampler | None:
    """The sample of live prompts a sidecar or proxy keeps for ``route`` (``sample_prompts``: ``cap`` per
    domain; 0: none). Users' prompts: without a token anyone who reaches the port can read them, which is
    said at start."""
    if not cap:
        return None
    if token is None:
        log.warning("sample_prompts is on without a token: GET %s gives users' prompts to anyone who reaches "
                    "this port", route)
    return PromptSampler(SamplerConfig(cap=cap))
