"""Helpers of the step ring's tests: a taker that stands in for the sidecar, and varied records."""

from __future__ import annotations

import math
import random

from policies.base import Decision, StopState
from specwatch_core.records import StepRecord
from sidecar_fakes import T0, step
from storage import StatsQuery


class Taker:
    """Records what the reader feeds; decides K per domain from ``ks``; a settable stop state."""

    def __init__(self):
        self.taken: list[StepRecord] = []
        self.ks: dict[str, int] = {}
        self.stop: StopState | None = None

    def take(self, steps):
        self.taken += steps
        return {s.domain for s in steps}

    def decide(self, domain):
        k = self.ks.get(domain, 3)
        return Decision(k, k > 0, "test", "fake")

    def stop_state(self, domain):
        return self.stop



def rich_step(i: int, rng: random.Random) -> StepRecord:
    k = rng.randint(0, 8)
    a = rng.randint(0, k)
    full = i % 3 == 0
    return StepRecord(
        domain=rng.choice(["code", "prose", "logs", "ünïcode domain"]), lookahead=k, accepted=a,
        emitted=rng.randint(1, a + 1), draft_seconds=rng.random() / 100, verify_seconds=rng.random() / 50,
        target_version=rng.choice(["t1", "t2" * 64]), draft_version="d1",
        accepted_mask=[1] * a + [0] * (k - a) if full else None,
        expected_acceptance=[rng.random() for _ in range(k)] if full or i % 3 == 1 else None,
        draft_confidence=[rng.random() for _ in range(k)] if full else None,
        timestamp=T0 + i / 7 if i % 4 else None, pod=None if i % 5 == 0 else "p1",
        request_id=None if i % 2 else f"req-{i // 10}-é")


def record_steered(client, n: int = 400, seed: int = 3) -> list[StepRecord]:
    """``n`` steps of code and prose, each with the K the client decides, recorded as a decoder would."""
    rng = random.Random(seed)
    sent = []
    for i in range(n):
        k = client.decide("code").lookahead
        s = step(rng.choice(["code", "prose"]), k, rng.randint(0, k), T0 + i / 10)
        sent.append(s)
        client.record(s)
    return sent


def stored_and_sent(sidecar, store, sent: list[StepRecord]) -> tuple[dict, dict]:
    """(steps, accepted) per domain as the store has them after a final flush, and as they were sent."""
    sidecar.flush(math.inf)
    rows = store.stats(StatsQuery(by=("domain",))).rows
    got = {r["domain"]: (r["steps"], r["accepted"]) for r in rows}
    want = {d: (sum(s.domain == d for s in sent), sum(s.accepted for s in sent if s.domain == d))
            for d in ("code", "prose")}
    return got, want
