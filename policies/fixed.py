"""A fixed lookahead: the same K for every step of every domain (K = 0: never speculate).

The reference every adaptive policy is compared with ("best fixed arm" in regret terms).
"""

from __future__ import annotations

from policies.base import Decision, Outcome, Policy


class Fixed(Policy):
    """Always lookahead ``k`` (0 <= k <= kmax); learns nothing."""

    name = "fixed"

    def __init__(self, k: int, kmax: int = 8, seed: int | None = None):
        super().__init__(kmax, seed)
        if type(k) is not int or not 0 <= k <= kmax:
            raise ValueError(f"k must be an integer in 0..kmax ({kmax}), got {k!r}")
        self.k = k
        self._reason = f"fixed: K={k}"

    def choose(self, domain: str) -> Decision:
        return self.decision(self.k, self._reason)

    def update(self, domain: str, outcome: Outcome) -> "Fixed":
        return self

    def __repr__(self) -> str:
        return f"Fixed(k={self.k}, kmax={self.kmax})"
