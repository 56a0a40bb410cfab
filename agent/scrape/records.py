"""Records from the counts of one scrape interval (agent/scrape/pages/counts.py SpecCounters).

With per-position counts, D drafts, T drafted tokens, A accepted tokens and per_pos[i] (drafts accepted at
position i, 0-based) give the histogram of accepted lengths exactly: since acceptance is a prefix, the drafts
that accepted exactly m tokens are per_pos[m-1] - per_pos[m] (per_pos[-1] = D, per_pos[K] = 0).
``synthesize`` turns it into D per-step StepRecords whose accepted counts give back every per_pos count and A,
and whose lookaheads (each in max(accepted, 1)..K) sum to T, as even as that allows (when every draft drafts
K tokens, T = D * K and every record has K). Without per-position counts (SGLang, llama.cpp builds before
the per-position counter) ``aggregate`` writes one record of D steps instead, with no positions.

Time: the interval's step time (the engine's own when it exports one, else the scrape interval) goes into
``seconds``, shared equally by the per-step records; draft_seconds = verify_seconds = 0 say the engine did
not split it (alerts/metrics/export.py leaves such records out of the latency histograms).
"""

from __future__ import annotations

import random

from agent.scrape.pages.counts import SpecCounters
from specwatch_core.records import MAX_STEP_SECONDS, MAX_STEPS, StepRecord

# The largest ``seconds`` a record may carry (records.py refuses MAX_STEP_SECONDS itself).
LONGEST = MAX_STEP_SECONDS * (1 - 1e-9)


def accepted_lengths(delta: SpecCounters) -> list[int]:
    """counts[m]: drafts that accepted exactly m tokens, m = 0..K (from a consistent delta)."""
    p = delta.per_pos
    return [b - a for b, a in zip((delta.drafts, *p), (*p, 0))]


def lookahead_groups(delta: SpecCounters) -> list[tuple[int, int, int]]:
    """(accepted, lookahead, drafts) groups: accepted lengths exactly as counted, lookaheads summing to T.

    Water-filling: each draft starts at max(accepted, 1) tokens, then the lowest are raised to a common
    level L, and the remainder adds one token to drafts at L, those that accepted most first."""
    counts, k, total = accepted_lengths(delta), len(delta.per_pos), delta.draft_tokens
    floor = [max(m, 1) for m in range(k + 1)]

    def tokens(level: int) -> int:
        return sum(n * max(lo, level) for n, lo in zip(counts, floor))

    level = max(lv for lv in range(1, k + 1) if tokens(lv) <= total)
    extra = total - tokens(level)
    groups = []
    for m in range(k, -1, -1):
        n = counts[m]
        if not n:
            continue
        base = max(floor[m], level)
        raised = min(extra, n) if base == level and level < k else 0
        extra -= raised
        groups += [(m, base + 1, raised), (m, base, n - raised)]
    return [g for g in groups if g[2]]


def synthesize(delta: SpecCounters, *, domain: str, target_version: str, draft_version: str,
               timestamp: float | None = None, pod: str | None = None,
               seconds: float | None = None) -> list[StepRecord]:
    """One StepRecord per draft in ``delta`` (see the module docstring), ``seconds`` (the interval's step
    time) shared equally; raises ValueError if the counts are inconsistent or have no positions."""
    problem = delta.problem() or (None if delta.per_pos is not None else "no per-position counts")
    if problem:
        raise ValueError(problem)
    share = None if seconds is None or not delta.drafts else min(seconds / delta.drafts, LONGEST)
    records = []
    for accepted, k, n in lookahead_groups(delta):
        mask = [1] * accepted + [0] * (k - accepted)
        records += [StepRecord(domain=domain, lookahead=k, accepted=accepted, emitted=accepted + 1,
                               draft_seconds=0.0, verify_seconds=0.0, target_version=target_version,
                               draft_version=draft_version, accepted_mask=mask, timestamp=timestamp, pod=pod,
                               seconds=share)
                    for _ in range(n)]
    # Grouped by accepted length, a drift detector downstream would read a run of rejections then a run of
    # full acceptances as a change; a seeded shuffle keeps the sums and the output reproducible.
    random.Random(delta.drafts * 1_000_003 + delta.accepted).shuffle(records)
    return records


def aggregate(delta: SpecCounters, *, domain: str, target_version: str, draft_version: str,
              timestamp: float | None = None, pod: str | None = None,
              seconds: float | None = None) -> list[StepRecord]:
    """Aggregate records of the interval's D steps: one, or one per MAX_STEPS steps when D is larger (each
    part gets its share of drafted and accepted tokens and of the time); none when D = 0. ValueError if
    the counts are inconsistent."""
    problem = delta.problem()
    if problem:
        raise ValueError(problem)
    if not delta.drafts:
        return []
    k, records = delta.max_lookahead(), []
    for steps, drafted, accepted in split_counts(delta.drafts, delta.draft_tokens, delta.accepted):
        share = None if seconds is None else min(seconds * steps / delta.drafts, LONGEST)
        records.append(StepRecord(domain=domain, lookahead=k, accepted=accepted, emitted=accepted + steps,
                                  draft_seconds=0.0, verify_seconds=0.0, target_version=target_version,
                                  draft_version=draft_version, timestamp=timestamp, pod=pod, steps=steps,
                                  drafted=drafted, seconds=share))
    return records


def split_counts(steps: int, drafted: int, accepted: int, most: int = MAX_STEPS) -> list[tuple[int, int, int]]:
    """(steps, drafted, accepted) parts of at most ``most`` steps that sum to the whole. Drafted tokens are
    shared in proportion to steps and accepted ones in proportion to drafted (cumulative rounding), so each
    part keeps accepted <= drafted <= K * steps when the whole does."""
    parts, done_steps, done_drafted = [], 0, 0
    while done_steps < steps:
        s = min(most, steps - done_steps)
        d = drafted * (done_steps + s) // steps - drafted * done_steps // steps
        a = (accepted * (done_drafted + d) // drafted - accepted * done_drafted // drafted) if drafted else 0
        parts.append((s, d, a))
        done_steps, done_drafted = done_steps + s, done_drafted + d
    return parts


def records_of(delta: SpecCounters, **fields) -> list[StepRecord]:
    """Per-step records when the counts have positions, else one aggregate record."""
    return (synthesize if delta.per_pos is not None else aggregate)(delta, **fields)
