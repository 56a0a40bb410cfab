"""Opt-in sampling of live traffic for re-distilling a stale draft (Online Speculative Decoding, arXiv
2310.07177: keep distilling the draft on the queries it actually serves).

Nothing is kept unless sampling was switched on. Per domain, a seeded reservoir (Vitter's algorithm R) of at
most ``cap`` items keeps a uniform sample of everything offered since the last ``reset``; memory is bounded
by ``cap`` x domains x the longest item. An item is the prompt's token ids followed by the target's output:
data on the path the target actually takes, as DistillSpec (arXiv 2310.08461) recommends, without
re-generating it.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class SamplerConfig:
    rate: float = 1.0  # share of offered requests considered at all
    cap: int = 64  # per domain
    max_tokens: int = 4096  # per item: longer prompts keep their tail

    def __post_init__(self) -> None:
        if not isinstance(self.rate, (int, float)) or not 0.0 < self.rate <= 1.0:
            raise ValueError(f"rate: must be in (0, 1], got {self.rate!r}")
        for name in ("cap", "max_tokens"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"{name}: must be a positive integer, got {value!r}")


class PromptSampler:
    """Thread-safe per-domain reservoirs of (prompt + output) token ids."""

    def __init__(self, config: SamplerConfig | None = None, seed: int | None = None):
        self.config = config or SamplerConfig()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._kept: dict[str, list[list[int]]] = {}
        self._seen: dict[str, int] = {}

    def offer(self, domain: str, prompt: list[int], output: list[int] = ()) -> bool:
        """Consider one request; True if it is (for now) in the sample."""
        cfg = self.config
        with self._lock:
            if self._rng.random() >= cfg.rate:
                return False
            seen = self._seen[domain] = self._seen.get(domain, 0) + 1
            kept = self._kept.setdefault(domain, [])
            if len(kept) < cfg.cap:
                kept.append(_item(prompt, output, cfg.max_tokens))
                return True
            slot = self._rng.randrange(seen)
            if slot < cfg.cap:
                kept[slot] = _item(prompt, output, cfg.max_tokens)
                return True
            return False

    def sample(self, domain: str | None = None) -> list[list[int]]:
        """The items kept for ``domain`` (every domain's when None)."""
        with self._lock:
            if domain is not None:
                return [list(x) for x in self._kept.get(domain, [])]
            return [list(x) for items in self._kept.values() for x in items]

    def counts(self) -> dict[str, tuple[int, int]]:
        """Per domain: (kept, offered and considered)."""
        with self._lock:
            return {d: (len(self._kept[d]), self._seen[d]) for d in self._kept}

    def reset(self) -> None:
        with self._lock:
            self._kept.clear()
            self._seen.clear()


def _item(prompt: list[int], output: list[int], max_tokens: int) -> list[int]:
    """What is kept of a request: its last ``max_tokens`` tokens, prompt then output."""
    return (list(prompt) + list(output))[-max_tokens:]
