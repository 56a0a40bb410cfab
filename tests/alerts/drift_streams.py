"""Seeded acceptance streams for detector tests: iid flags, beta-distributed expected acceptance, changes."""

from __future__ import annotations

import random


def flags(p: float, n: int, rng: random.Random) -> list[int]:
    return [1 if rng.random() < p else 0 for _ in range(n)]


def change(p0: float, p1: float, before: int, after: int, seed: int) -> list[int]:
    """``before`` flags at acceptance p0, then ``after`` at p1; the change is at index ``before``."""
    rng = random.Random(seed)
    return flags(p0, before, rng) + flags(p1, after, rng)


def expected(mean: float, n: int, rng: random.Random, concentration: float = 4.0) -> list[float]:
    """Expected-acceptance values: Beta with this mean (skewed, bounded, like real ones)."""
    a, b = mean * concentration, (1 - mean) * concentration
    return [rng.betavariate(a, b) for _ in range(n)]


def expected_change(m0: float, m1: float, before: int, after: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return expected(m0, before, rng) + expected(m1, after, rng)


def first_alarm(detector, stream, start: int = 0) -> int | None:
    """Index of the first observation at or after ``start`` whose update confirmed a change."""
    for i, x in enumerate(stream):
        detector.update(x)
        if detector.drift_detected and i >= start:
            return i
    return None


def alarms(detector, stream) -> list[int]:
    out = []
    for i, x in enumerate(stream):
        if detector.update(x).drift_detected:
            out.append(i)
    return out
