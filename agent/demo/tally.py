"""Counts of a demo run per (phase, domain): what the live view and the summary table show.

Raw sums only; rates are computed when shown. "Target-only" is the same prompts decoded by the target
alone (K = 0 every step) in the same phase, so a speed-up compares like with like on this machine now.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass
class Cell:
    requests: int = 0
    tokens: int = 0
    seconds: float = 0.0
    steps: int = 0
    drafted: int = 0
    accepted: int = 0
    plain_steps: int = 0  # steps run at K = 0 (speculation off, or a K = 0 measurement)
    ref_tokens: int = 0
    ref_seconds: float = 0.0

    @property
    def acceptance(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None

    @property
    def tps(self) -> float | None:
        return self.tokens / self.seconds if self.seconds > 0 else None

    @property
    def ref_tps(self) -> float | None:
        return self.ref_tokens / self.ref_seconds if self.ref_seconds > 0 else None

    @property
    def speedup(self) -> float | None:
        tps, ref = self.tps, self.ref_tps
        return tps / ref if tps and ref else None

    @property
    def mean_lookahead(self) -> float | None:
        return self.drafted / self.steps if self.steps else None

    @property
    def plain_share(self) -> float | None:
        return self.plain_steps / self.steps if self.steps else None


@dataclass
class Tally:
    recent_steps: int = 200
    cells: dict[tuple[int, str], Cell] = field(default_factory=dict)
    _recent: dict[str, deque] = field(default_factory=dict)

    def cell(self, phase: int, domain: str) -> Cell:
        key = (phase, domain)
        if key not in self.cells:
            self.cells[key] = Cell()
        return self.cells[key]

    def add_generation(self, phase: int, domain: str, steps, tokens: int, seconds: float) -> None:
        c = self.cell(phase, domain)
        c.requests += 1
        c.tokens += tokens
        c.seconds += seconds
        recent = self._recent.setdefault(domain, deque(maxlen=self.recent_steps))
        for s in steps:
            c.steps += 1
            c.drafted += s.lookahead
            c.accepted += s.accepted
            c.plain_steps += s.lookahead == 0
            if s.lookahead:
                recent.append((s.accepted, s.lookahead))

    def add_reference(self, phase: int, domain: str, tokens: int, seconds: float) -> None:
        c = self.cell(phase, domain)
        c.ref_tokens += tokens
        c.ref_seconds += seconds

    def recent_acceptance(self, domain: str) -> float | None:
        """accepted / drafted over the domain's last ``recent_steps`` speculative steps."""
        recent = self._recent.get(domain)
        drafted = sum(k for _, k in recent) if recent else 0
        return sum(a for a, _ in recent) / drafted if drafted else None
