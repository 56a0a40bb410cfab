"""Step records for storage and CLI tests: one factory, and a small synthetic history."""

from __future__ import annotations

import random

from specwatch_core.records import StepRecord

T0 = 1_700_000_000 - 1_700_000_000 % 86400  # a UTC midnight


def step(domain: str = "code", k: int = 4, accepted: int = 2, ts: float = T0, *, target: str = "t1",
         draft: str = "d1", pod: str | None = None, emitted: int | None = None, draft_s: float = 0.004,
         verify_s: float = 0.010, expected: float | None = 0.5) -> StepRecord:
    return StepRecord(domain=domain, lookahead=k, accepted=accepted,
                      emitted=accepted + 1 if emitted is None else emitted, draft_seconds=draft_s,
                      verify_seconds=verify_s, target_version=target, draft_version=draft,
                      accepted_mask=[1] * accepted + [0] * (k - accepted),
                      expected_acceptance=None if expected is None else [expected] * k, timestamp=ts, pod=pod)


def aggregate(domain: str = "code", k: int = 4, steps: int = 10, accepted: int = 20, ts: float = T0, *,
              drafted: int | None = None, emitted: int | None = None, seconds: float | None = 0.1,
              draft_s: float = 0.0, verify_s: float = 0.0, target: str = "t1", draft: str = "d1",
              pod: str | None = None, pool: str | None = None) -> StepRecord:
    """A per-request record folding ``steps`` steps (emitted: accepted + steps unless given)."""
    return StepRecord(domain=domain, lookahead=k, accepted=accepted, steps=steps, drafted=drafted,
                      emitted=accepted + steps if emitted is None else emitted, draft_seconds=draft_s,
                      verify_seconds=verify_s, seconds=seconds, target_version=target, draft_version=draft,
                      timestamp=ts, pod=pod, pool=pool)


def fold(records: list[StepRecord], *, split: bool = False, pool: str | None = None) -> StepRecord:
    """The per-step ``records`` (one request) as one aggregate: sums of drafted, accepted and emitted tokens;
    time as ``seconds`` alone (an engine that does not split it), or as draft and verify seconds (``split``)."""
    first = records[0]
    draft = sum(r.draft_seconds for r in records)
    verify = sum(r.verify_seconds for r in records)
    return StepRecord(domain=first.domain, lookahead=first.lookahead, steps=len(records),
                      drafted=sum(r.lookahead for r in records), accepted=sum(r.accepted for r in records),
                      emitted=sum(r.emitted for r in records), draft_seconds=draft if split else 0.0,
                      verify_seconds=verify if split else 0.0, seconds=None if split else draft + verify,
                      target_version=first.target_version, draft_version=first.draft_version,
                      timestamp=first.timestamp, pod=first.pod, pool=pool)


def random_steps(n: int, start: float, seconds: float, seed: int = 0,
                 domains: tuple[str, ...] = ("code", "chat", "prose")) -> list[StepRecord]:
    """``n`` steps spread over [start, start + seconds), mixed domains, K in {0, 2, 4}, two pods."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.choice((0, 2, 4))
        a = min(k, sum(rng.random() < 0.7 for _ in range(k)))
        out.append(step(rng.choice(domains), k, a, start + rng.random() * seconds,
                        pod=rng.choice(("pod-a", "pod-b")), draft_s=0.001 * k * rng.random(),
                        verify_s=0.01 * rng.random(), expected=round(rng.random(), 3),
                        target=rng.choice(("t1", "t2"))))
    return out


def day_of_history(store, start: float = T0) -> None:
    """A day of three domains, minute by minute: code's target is updated at 14:00 and its acceptance
    drops, an alert fires at 14:20, speculation is off for code 16:00-19:00; chat stays steady."""
    rng = random.Random(7)
    records = []
    for minute in range(24 * 60):
        ts = start + minute * 60
        for domain, rate in (("code", 0.8), ("chat", 0.6), ("prose", 0.45)):
            target = "t1"
            if domain == "code" and minute >= 14 * 60:
                rate, target = 0.35, "t2"
            off = domain == "code" and 16 * 60 <= minute < 19 * 60
            for _ in range(3):
                k = 0 if off else 4
                a = 0
                while a < k and rng.random() < rate:
                    a += 1
                records.append(step(domain, k, a, ts + rng.random() * 59, target=target,
                                    expected=None if off else rate))
    store.write_records(records)
    store.flush(start + 86400)
    store.rollup(start + 86400)
    store.record_transition("code", False, "slower than target alone", ts=start + 16 * 3600)
    store.record_transition("code", True, "probing again", ts=start + 19 * 3600)
    from storage import StoredAlert

    store.save_alert(StoredAlert({"alertname": "AcceptanceDrop", "domain": "code", "severity": "warning"},
                                 {"summary": "acceptance 0.80 -> 0.35 after target t2"},
                                 starts_at=start + 14 * 3600 + 20 * 60), now=start + 14 * 3600 + 20 * 60)
