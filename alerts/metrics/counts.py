"""Raw counts behind specwatch's Prometheus metrics, and what the exported series derive from them.

Counting is plain integer and float arithmetic on one ``DomainCounts`` per domain label, done on the hot
path; deriving (per-position totals, the window ratio, cumulative buckets) happens only when /metrics is
scraped. Like storage/counts.py, a histogram of accepted lengths per lookahead (hist[K][a] = steps that
drafted K and accepted a) carries the per-position counts, so counting a step is one increment whatever K.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass, field

# Seconds. A draft forward of a small model is usually sub-millisecond to tens of milliseconds per token;
# a target verification pass milliseconds to a second or more.
DRAFT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
VERIFY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


@dataclass(frozen=True)
class MetricsConfig:
    """What the exporter bounds and how it summarises.

    - ``max_domains``: distinct domain label values; records of further domains count under ``other``.
    - ``max_positions``: per-position series are exported for drafted positions 1..max_positions.
    - ``window_tokens``: the acceptance-ratio gauge weighs a drafted token by (1 - 1/window_tokens) per
      later drafted token, so it covers about the last ``window_tokens`` drafted tokens of the domain.
    """

    max_domains: int = 32
    max_positions: int = 16
    window_tokens: int = 1000
    draft_buckets: tuple[float, ...] = DRAFT_BUCKETS
    verify_buckets: tuple[float, ...] = VERIFY_BUCKETS

    def __post_init__(self) -> None:
        if type(self.max_domains) is not int or not 1 <= self.max_domains <= 10_000:
            raise ValueError(f"max_domains must be an integer in 1..10000, got {self.max_domains!r}")
        if type(self.max_positions) is not int or not 1 <= self.max_positions <= 256:
            raise ValueError(f"max_positions must be an integer in 1..256, got {self.max_positions!r}")
        if type(self.window_tokens) is not int or self.window_tokens < 2:
            raise ValueError(f"window_tokens must be an integer >= 2, got {self.window_tokens!r}")
        for name in ("draft_buckets", "verify_buckets"):
            bounds = getattr(self, name)
            if (not bounds or any(not isinstance(b, (int, float)) or not math.isfinite(b) or b <= 0
                                  for b in bounds) or list(bounds) != sorted(set(bounds))):
                raise ValueError(f"{name} must be increasing positive finite seconds, got {bounds!r}")

    def decay_table(self) -> list[float]:
        """decay_table()[k]: the weight left to older tokens after a step that drafted k tokens."""
        keep = 1.0 - 1.0 / self.window_tokens
        return [keep ** k for k in range(self.max_positions + 1)]


class LatencyCounts:
    """A Prometheus histogram's raw state: per-bucket (not cumulative) counts and the sum."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]):
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one is +Inf
        self.total = 0.0

    def add(self, seconds: float) -> None:
        # bisect_left: a value equal to a bound belongs to that bucket (le is "less or equal").
        self.counts[bisect_left(self.bounds, seconds)] += 1
        self.total += seconds

    def copy(self) -> "LatencyCounts":
        other = LatencyCounts(self.bounds)
        other.counts, other.total = list(self.counts), self.total
        return other

    def buckets(self) -> list[tuple[str, int]]:
        """Cumulative (le, count) pairs, ending with +Inf, as Prometheus exposes them."""
        out, running = [], 0
        for bound, n in zip((*self.bounds, math.inf), self.counts):
            running += n
            out.append(("+Inf" if bound == math.inf else repr(float(bound)), running))
        return out


@dataclass(slots=True)
class DomainCounts:
    """Sums over every step of one domain label since the process started."""

    draft: LatencyCounts
    verify: LatencyCounts
    steps: int = 0
    drafted: int = 0
    accepted: int = 0
    emitted: int = 0
    hist: dict[int, list[int]] = field(default_factory=dict)  # lookahead -> counts of accepted lengths
    window_accepted: float = 0.0  # decayed sums over recent drafted tokens
    window_drafted: float = 0.0

    @classmethod
    def new(cls, config: MetricsConfig) -> "DomainCounts":
        return cls(LatencyCounts(config.draft_buckets), LatencyCounts(config.verify_buckets))

    def snapshot(self) -> "DomainCounts":
        """A copy safe to read while the original keeps counting."""
        return DomainCounts(self.draft.copy(), self.verify.copy(), self.steps, self.drafted, self.accepted,
                            self.emitted, {k: list(h) for k, h in self.hist.items()},
                            self.window_accepted, self.window_drafted)


def position_totals(hist: dict[int, list[int]], max_positions: int) -> list[tuple[int, int, int]]:
    """(position, reached, accepted) for drafted positions 1..max_positions that some step reached.

    A drafted token at position i is reached (verified) when the i - 1 before it were accepted; tokens after
    the first rejection are discarded unverified and not counted. accepted / reached is the conditional
    acceptance at i; accepted alone equals vLLM's unconditional per_pos[i - 1] (drafts accepted at i).
    """
    reached = [0] * (max_positions + 2)
    accepted = [0] * (max_positions + 2)
    for k, counts in hist.items():
        at_least = sum(counts)  # steps of this K with accepted >= i - 1, starting at i = 1
        for i in range(1, min(k, max_positions) + 1):
            reached[i] += at_least
            at_least -= counts[i - 1]
            accepted[i] += at_least
    return [(i, reached[i], accepted[i]) for i in range(1, max_positions + 1) if reached[i]]


def window_ratio(counts: DomainCounts) -> float | None:
    """Accepted / drafted over the recent window, or None before the domain drafted anything."""
    if counts.window_drafted <= 0.0:
        return None
    return min(1.0, counts.window_accepted / counts.window_drafted)
