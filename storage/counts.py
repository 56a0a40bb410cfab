"""Raw counts of one window of one series, and what the stored columns derive from them.

A series is (pod, domain, target_version, draft_version, lookahead). Drafted and accepted tokens are summed
directly, so per-step records and aggregates (specwatch_core/records.py: many steps of one request, positions
unknown) add to the same sums. Per-step records also count in a histogram of accepted lengths (hist[a] =
steps that accepted a of K), which alone gives the per-position counts: aggregates never enter it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_LOOKAHEAD = 64  # the largest K a store takes (llama.cpp's n-gram --spec-default drafts up to 64 a step)
POSITIONS = 32  # per-position counts are kept for positions 1..POSITIONS; a per-step record of a larger K keeps
# its sums, and its positions above POSITIONS are not counted (aggregate records have no positions anyway)
SeriesKey = tuple[str, str, str, str, int]  # pod, domain, target_version, draft_version, lookahead


@dataclass(slots=True)
class WindowCounts:
    """Sums over the steps of one series in one window."""

    lookahead: int
    steps: int = 0
    emitted: int = 0
    draft_seconds: float = 0.0
    verify_seconds: float = 0.0
    expected_sum: float = 0.0  # sum of expected acceptance over drafted positions that reported it
    expected_n: int = 0  # how many drafted positions reported it
    hist: list[int] = field(default_factory=list)  # hist[a]: per-step records with `a` accepted, a = 0..K
    drafted: int = 0  # drafted tokens, every record
    accepted: int = 0  # accepted tokens, every record

    def __post_init__(self) -> None:
        if not self.hist:
            self.hist = [0] * (self.lookahead + 1)

    def merged(self, other: "WindowCounts") -> "WindowCounts":
        """A new WindowCounts holding both sums (same series)."""
        if other.lookahead != self.lookahead:
            raise ValueError("cannot merge windows of different lookahead")
        return WindowCounts(
            self.lookahead, self.steps + other.steps, self.emitted + other.emitted,
            self.draft_seconds + other.draft_seconds, self.verify_seconds + other.verify_seconds,
            self.expected_sum + other.expected_sum, self.expected_n + other.expected_n,
            [a + b for a, b in zip(self.hist, other.hist)], self.drafted + other.drafted,
            self.accepted + other.accepted)


def accepted_tokens(c: WindowCounts) -> int:
    return c.accepted


def drafted_tokens(c: WindowCounts) -> int:
    return c.drafted


def position_counts(hist: list[int]) -> list[tuple[int, int, int]]:
    """(position, reached, accepted) for positions 1..K from a histogram of accepted lengths.

    A draft reaches position i when the first i - 1 tokens were accepted; it is accepted there when at
    least i were. Positions after the first rejection were never verified and are not counted, so
    accepted / reached is the conditional acceptance at i. Positions no draft reached are left out.
    """
    rows = []
    at_least = sum(hist)  # steps with accepted >= i - 1, starting at i = 1
    for i in range(1, len(hist)):
        reached = at_least
        if not reached:
            break
        at_least -= hist[i - 1]
        rows.append((i, reached, at_least))
    return rows


def at_least(hist: list[int]) -> list[int]:
    """[steps that accepted at least i drafted tokens for i in 0..K] from a histogram of accepted lengths:
    position i was reached ``at_least[i - 1]`` times and accepted ``at_least[i]`` times."""
    out, total = [], sum(hist)
    for h in hist:
        out.append(total)
        total -= h
    return out
