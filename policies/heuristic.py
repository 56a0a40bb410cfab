"""transformers' "heuristic" schedule for the number of assistant (draft) tokens, per domain.

After a step in which every drafted token was accepted, draft 2 more next time; after any rejection,
draft 1 fewer, never fewer than 1 (transformers ``AssistedCandidateGenerator.update_candidate_strategy``).
Unlike transformers, K is capped at ``kmax``. It looks at acceptance only, never at time, and never turns
speculation off: the baseline the goodput policies must beat.
"""

from __future__ import annotations

from policies.base import Decision, Outcome, Policy


class Heuristic(Policy):
    """+2 after a fully accepted draft, -1 otherwise; within 1..kmax; starts at ``start``.

    ``start`` defaults to min(5, kmax): transformers' original default for this schedule (its later
    default of 20 only makes sense uncapped), and a typical hand-tuned lookahead (3-7) for a decent
    draft model. Steps with lookahead 0 (speculation switched off elsewhere) say nothing about the draft
    and leave the schedule alone.
    """

    name = "heuristic"

    def __init__(self, kmax: int = 8, start: int | None = None, seed: int | None = None):
        super().__init__(kmax, seed)
        if start is None:
            start = min(5, kmax)
        if type(start) is not int or not 1 <= start <= kmax:
            raise ValueError(f"start must be an integer in 1..kmax ({kmax}), got {start!r}")
        self.start = start
        self._k: dict[str, int] = {}
        self._why: dict[str, str] = {}

    def choose(self, domain: str) -> Decision:
        k = self._k.get(domain, self.start)
        return self.decision(k, f"heuristic: K={k} {self._why.get(domain, 'start')}")

    def update(self, domain: str, outcome: Outcome) -> "Heuristic":
        if outcome.lookahead <= 0 or outcome.drafted <= 0:
            return self
        k = self._k.get(domain, self.start)
        if outcome.accepted >= outcome.drafted:  # an aggregate: every drafted token of its steps
            self._k[domain], self._why[domain] = min(k + 2, self.kmax), "(+2: last draft fully accepted)"
        else:
            self._k[domain], self._why[domain] = max(k - 1, 1), "(-1: last draft had a rejection)"
        return self

    def forget(self, domain: str) -> "Heuristic":
        self._k.pop(domain, None)
        self._why.pop(domain, None)
        return self

    def __repr__(self) -> str:
        return f"Heuristic(kmax={self.kmax}, start={self.start})"
