"""A seeded synthetic speculative-decoding world for policy tests: acceptance and costs you can change."""

from __future__ import annotations

import random
from dataclasses import dataclass

from policies.base import Outcome


@dataclass
class World:
    """Per-position acceptance ``accept`` (constant), draft cost per token and verify cost growing with K.

    ``scale`` multiplies every cost: a fast and a slow machine see the same world in other units.
    """

    accept: float = 0.9
    draft_cost: float = 0.2
    verify_cost: float = 1.0
    verify_growth: float = 0.1  # verify of K + 1 tokens costs verify_cost * (1 + growth K)
    noise: float = 0.1  # relative spread of each measured cost
    scale: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def step(self, k: int) -> Outcome:
        accepted = 0
        while accepted < k and self.rng.random() < self.accept:
            accepted += 1
        mask = tuple([1] * accepted + [0] * (k - accepted))
        draft = k * self.draft_cost * self._jitter()
        verify = self.verify_cost * (1 + self.verify_growth * k) * self._jitter()
        return Outcome(k, accepted, accepted + 1, draft * self.scale, verify * self.scale, mask)

    def _jitter(self) -> float:
        return max(0.05, 1.0 + self.rng.gauss(0.0, self.noise))
