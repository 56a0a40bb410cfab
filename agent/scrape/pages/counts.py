"""Speculative-decoding counts of one engine: a snapshot of its counters, or the difference of two (a delta).

Terms: a *draft* is one verification pass of one request (the target checks up to K drafted tokens);
*draft tokens* are the tokens drafted; *accepted* the drafted tokens the target kept; ``per_pos[i]`` the
drafts whose token at position i (0-based) was accepted. Acceptance is a prefix, so ``per_pos`` never grows
with position and sums to ``accepted``.
"""

from __future__ import annotations

from dataclasses import dataclass


class PageError(ValueError):
    """A metrics page without an engine's speculative-decoding metrics, or with them broken."""


@dataclass(frozen=True)
class SpecCounters:
    """One engine's counts. ``per_pos`` None: the engine exports no per-position counts (its deltas become
    aggregate records). ``seconds``: the engine's own step time, a counter (None: not exported).
    ``lookahead``: K when the engine states it apart from ``per_pos``. ``witness``: (name, value) of other
    counters of the same engine, any of which going down means the engine restarted. ``settle`` is for snapshots that
    need the one before to be complete (SGLang's); counters need nothing."""

    drafts: int
    draft_tokens: int
    accepted: int
    per_pos: tuple[int, ...] | None
    created: float | None = None  # when the engine's counters started (None: unknown, or a delta)
    seconds: float | None = None
    lookahead: int | None = None
    witness: tuple[tuple[str, float], ...] = ()
    unknown: str | None = None  # why the counts could not be made (a delta that is only a problem)

    def minus(self, earlier: "SpecCounters") -> "SpecCounters | None":
        """The counts since ``earlier``, or None when the counters restarted in between: a new ``created``
        time, a counter or witness that went down, or positions that disappeared. Positions that appeared
        (a longer draft than any before) count from zero."""
        if self.created is not None and earlier.created is not None and self.created != earlier.created:
            return None
        before = dict(earlier.witness)
        if any(value < before.get(name, value) for name, value in self.witness):
            return None
        per_pos = None
        if self.per_pos is not None and earlier.per_pos is not None:
            if len(self.per_pos) < len(earlier.per_pos):
                return None
            padded = earlier.per_pos + (0,) * (len(self.per_pos) - len(earlier.per_pos))
            per_pos = tuple(a - b for a, b in zip(self.per_pos, padded))
        elif self.per_pos is not None and earlier.drafts == 0:
            per_pos = self.per_pos  # the positions appear with the first draft (llama.cpp)
        seconds = None
        if self.seconds is not None and earlier.seconds is not None:
            seconds = self.seconds - earlier.seconds
            if seconds < 0:
                return None
        delta = SpecCounters(self.drafts - earlier.drafts, self.draft_tokens - earlier.draft_tokens,
                             self.accepted - earlier.accepted, per_pos, seconds=seconds, lookahead=self.lookahead)
        if min(delta.drafts, delta.draft_tokens, delta.accepted, *(per_pos or ()), 0) < 0:
            return None
        return delta

    def settle(self, earlier: object) -> "SpecCounters":
        return self

    def since_start(self) -> "SpecCounters":
        """All counts since the counters started, as a delta (after a restart, like Prometheus' increase)."""
        return SpecCounters(self.drafts, self.draft_tokens, self.accepted, self.per_pos, seconds=self.seconds,
                            lookahead=self.lookahead)

    def max_lookahead(self) -> int:
        """K of these counts' records: ``lookahead``, else the positions, else draft tokens per draft rounded up."""
        if self.lookahead is not None:
            return self.lookahead
        if self.per_pos:
            return len(self.per_pos)
        return -(-self.draft_tokens // self.drafts) if self.drafts else 0

    def problem(self) -> str | None:
        """Why these counts (a delta) cannot come from whole drafts, or None when they can.

        A page scraped while an engine updates its counters one by one can show part of an update; such a
        delta resolves at the next scrape."""
        if self.unknown:
            return self.unknown
        if self.drafts == 0:
            zero = self.draft_tokens == self.accepted == sum(self.per_pos or ()) == 0
            return None if zero else "tokens without drafts"
        if self.accepted > self.draft_tokens:
            return f"accepted tokens {self.accepted} > draft tokens {self.draft_tokens}"
        p = self.per_pos
        if p is None:
            k = self.max_lookahead()
            return None if self.draft_tokens <= self.drafts * k else (
                f"draft tokens {self.draft_tokens} > {k} per draft for {self.drafts} drafts")
        if sum(p) != self.accepted:
            return f"per-position accepted sum {sum(p)} != accepted tokens {self.accepted}"
        if any(later > earlier for earlier, later in zip((self.drafts, *p), p)):
            return "per-position counts must not grow with position (acceptance is a prefix)"
        k = len(p)
        if not self.drafts <= self.draft_tokens <= self.drafts * k:
            return f"draft tokens {self.draft_tokens} outside 1..{k} per draft for {self.drafts} drafts"
        least = self.accepted + (self.drafts - p[0]) if k else 0  # each draft drafts >= max(accepted, 1)
        if self.draft_tokens < least:
            return f"draft tokens {self.draft_tokens} fewer than accepted plus rejected drafts ({least})"
        return None
