"""Summed counts of a group of stored rows, and the ratios derived from them (pure functions).

Ratios are always taken of sums (accepted / drafted over the whole group), never averaged. A ratio whose
denominator is zero is None.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(slots=True)
class Totals:
    steps: int = 0
    drafted: int = 0
    accepted: int = 0
    emitted: int = 0
    expected_n: int = 0
    expected_sum: float = 0.0
    draft_seconds: float = 0.0
    verify_seconds: float = 0.0

    def __add__(self, other: "Totals") -> "Totals":
        return Totals(*(getattr(self, name) + getattr(other, name) for name in _NAMES))


_NAMES = tuple(f.name for f in fields(Totals))  # once: a query by pod adds thousands of Totals


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def acceptance_rate(t: Totals) -> float | None:
    """Accepted / drafted tokens, every drafted position counted (as vLLM does)."""
    return _ratio(t.accepted, t.drafted)


def mean_accepted(spec: Totals) -> float | None:
    """Accepted tokens per speculative step (K > 0)."""
    return _ratio(spec.accepted, spec.steps)


def tokens_per_step(t: Totals) -> float | None:
    return _ratio(t.emitted, t.steps)


def seconds_per_step(seconds: float, t: Totals) -> float | None:
    return _ratio(seconds, t.steps)


def expected_acceptance(t: Totals) -> float | None:
    """Mean over drafted positions of sum_x min(p, q): P(a token drafted there is accepted)."""
    return _ratio(t.expected_sum, t.expected_n)


def goodput(t: Totals) -> float | None:
    """Tokens emitted per second of step time (draft + verify)."""
    return _ratio(t.emitted, t.draft_seconds + t.verify_seconds)


def speedup(spec: Totals, plain: Totals) -> float | None:
    """Goodput of speculative steps over goodput of plain (K = 0) steps; None without both."""
    with_spec, without = goodput(spec), goodput(plain)
    return with_spec / without if with_spec is not None and without else None


def conditional_acceptance(reached: int, accepted: int) -> float | None:
    """Of the drafts that reached a position, the share accepted there."""
    return _ratio(accepted, reached)
