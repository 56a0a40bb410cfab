"""DriftWatch: per-domain drift detection fed with whole StepRecords; returns Findings.

Per domain and (target version, draft version) pair, a lineage (alerts/lineage.py) runs the acceptance
detectors on the step's flags, counted up to and including the first rejection (later positions were
never verified): a Bernoulli CUSUM, a CUSUM on expected acceptance when records carry it, and ADWIN. Any
of them confirming a drop gives an AcceptanceDrift finding and re-baselines that lineage.

When a domain's records show a new version pair, its lineage starts warming up its own detectors and a
sequential test (alerts/detectors/sprt.py) compares its acceptance with the running baseline of the pair
it replaced; a confirmed drop gives StaleDraft (versions, acceptance before/after, the speed-up lost by
Leviathan's formula with the measured cost ratio, and what to do). A change without a drop ends the test
quietly. Plain steps (lookahead 0) feed the below-break-even comparison (alerts/breakeven.py) only.

Hot path: ``observe`` does arithmetic only, no I/O, no locks; not thread-safe (the Sidecar serialises it)
and it keeps state for every domain it is given (the Sidecar bounds domains).
"""

from __future__ import annotations

import math
import random
import time
from statistics import NormalDist
from typing import Callable

from alerts.breakeven import BreakEven
from alerts.detectors import ExpectedSPRT
from alerts.detectors.sprt import NO_DROP, SequentialTest
from alerts.findings import Finding, Speed, breakeven_finding, drift_finding, stale_finding
from alerts.lineage import Lineage
from alerts.watch_config import WatchConfig
from specwatch_core.records import StepRecord

__all__ = ["DriftWatch", "Finding", "WatchConfig"]


class _Domain:
    __slots__ = ("lineages", "current", "target", "draft_version", "breakeven", "draft", "drafted", "verify",
                 "steps", "stale")

    def __init__(self, config: WatchConfig):
        self.lineages: dict[tuple[str, str], Lineage] = {}
        self.current: Lineage | None = None
        self.target = self.draft_version = ""  # the current lineage's versions
        self.breakeven = BreakEven(config.breakeven) if config.breakeven is not None else None
        # faded sums over timed speculative steps: the cost ratio c and the mean lookahead
        self.draft = self.drafted = self.verify = self.steps = 0.0
        # (version pair, acceptance before, after) of the last StaleDraft finding, until a later pair recovers
        self.stale: tuple[tuple[str, str], float, float] | None = None

    def speed(self) -> Speed:
        k = max(1, round(self.drafted / self.steps)) if self.steps else 0
        if self.drafted <= 0 or self.verify <= 0:
            return Speed(k, None)
        # Leviathan's c: one draft forward over one target forward; a verify pass stands for the latter
        return Speed(k, (self.draft / self.drafted) / (self.verify / self.steps))


class DriftWatch:
    """See the module docstring. ``clock`` dates a version change when its first record has no timestamp."""

    def __init__(self, config: WatchConfig | None = None, clock: Callable[[], float] = time.time):
        self.config = config or WatchConfig()
        self._clock = clock
        self._domains: dict[str, _Domain] = {}
        self._fade = math.exp2(-1.0 / self.config.cost_halflife)
        self._recovery_z = NormalDist().inv_cdf(1 - self.config.stale.alpha)  # see _cleared

    def observe(self, record: StepRecord) -> list[Finding]:
        """Findings of one record. An aggregate of many steps (records.is_aggregate) counts as
        ``accepted`` accepted tokens and drafted - accepted rejected ones: unconditional per-token acceptance,
        as vLLM counts, since its positions (where each step's first rejection fell) are unknown. That is a
        different measure from a per-step record's flags up to the first rejection (lower for the same
        draft), but an engine reports one kind, so a lineage's baseline and the records tested against it
        use the same one and StaleDraft compares like with like. Its tokens feed the detectors as steps of K
        (``_observe_tokens``).
        Break-even takes the record's step time (``seconds`` when given) and emitted tokens as one
        observation; the cost ratio takes its draft and verify time over its drafted tokens and steps."""
        d = self._domains.get(record.domain)
        if d is None:
            d = self._domains[record.domain] = _Domain(self.config)
        k, steps, drafted, seconds = record.lookahead, record.steps, record.drafted, record.seconds
        out: list[Finding] = []
        if d.breakeven is not None:
            loss = d.breakeven.observe(k, record.emitted, record.draft_seconds + record.verify_seconds
                                       if seconds is None else seconds)
            if loss is not None:
                acceptance = d.current.flags.mean if d.current is not None and d.current.flags.n else None
                out.append(breakeven_finding(record.domain, loss.speculative, loss.plain, acceptance,
                                             loss.lookahead))
        if k == 0:
            return out
        aggregate = steps != 1 or (drafted is not None and drafted != k)
        drafted = k * steps if drafted is None else drafted
        if record.verify_seconds > 0:
            f = self._fade
            d.draft = d.draft * f + record.draft_seconds
            d.drafted = d.drafted * f + drafted
            d.verify = d.verify * f + record.verify_seconds
            d.steps = d.steps * f + steps
        lineage = d.current
        if lineage is None or record.target_version != d.target or record.draft_version != d.draft_version:
            lineage = self._switch(d, (record.target_version, record.draft_version), record)
        accepted = record.accepted
        if aggregate:
            fired = _observe_tokens(lineage, k, accepted, drafted - accepted)
        else:
            rejected = 1 if accepted < k else 0
            values = record.expected_acceptance
            if values is not None:
                values = values[: accepted + rejected]
            fired = lineage.observe(accepted, rejected, values)
        if d.stale is not None and d.stale[0] != lineage.versions:
            cleared = self._cleared(record.domain, d, lineage)
            if cleared is not None:
                out.append(cleared)
        if not fired:
            return out
        test = lineage.test
        if test is not None and test in fired:
            fired.remove(test)
            expected = (test.reference, test.mean) if isinstance(test, ExpectedSPRT) else None
            out.append(stale_finding(record.domain, lineage.before, lineage.flags.mean, test.observations,
                                     lineage.origin, lineage.versions, d.speed(), lineage.since, expected))
            d.stale = (lineage.versions, lineage.before, lineage.flags.mean)
        if fired:  # one finding for the change, naming every detector that confirmed it
            change = fired[0].change  # flag detectors come first: their numbers are acceptance proper
            out.append(drift_finding(record.domain, "+".join(f.name for f in fired), change.before, change.after,
                                     change.observations, lineage.versions, d.speed()))
        return out

    def _switch(self, d: _Domain, key: tuple[str, str], record: StepRecord) -> Lineage:
        """The records' versions differ from the last record's: that pair's lineage, new if unseen (then
        tested against the lineage it replaces)."""
        lineage = d.lineages.pop(key, None)
        if lineage is None:
            lineage = Lineage(key, self.config)
            lineage.since = record.timestamp or self._clock()
            origin = d.current
            if origin is not None:
                lineage.start_test(origin, self.config.stale, self.config.min_baseline,
                                   record.expected_acceptance is not None)
            while len(d.lineages) >= self.config.max_lineages:
                del d.lineages[next(iter(d.lineages))]  # the least recently switched to
        d.lineages[key] = lineage
        d.current, (d.target, d.draft_version) = lineage, key
        return lineage

    def _cleared(self, domain: str, d: _Domain, lineage: Lineage) -> Finding | None:
        """A later version pair (a re-distilled draft, a rolled-back target) ends the StaleDraft condition when
        its test against the stale pair concluded "no drop" and its acceptance has come back at least half way
        from the stale level to the one before (no drop from a stale level alone is no recovery).

        When the stale pair left too little baseline to test against (speculation was turned off for the
        domain soon after the finding, as it should be), the later pair is judged on its own: after at least
        ``min_baseline`` positions, the one-sided lower confidence bound of its acceptance (level 1 - the
        stale test's alpha; variance widened by the flags' dispersion at the scale of a request) must be at
        least half way back."""
        test = lineage.test
        _, before, after = d.stale
        halfway = after + 0.5 * (before - after)
        if test is None:
            flags = lineage.flags
            if flags.n < self.config.min_baseline:
                return None
            m = flags.mean
            variance = m * (1 - m)
            if m - self._recovery_z * math.sqrt(flags.dispersion(variance) * variance / flags.n) < halfway:
                return None
        elif test.decision != NO_DROP or lineage.flags.mean < halfway:
            return None
        d.stale = None
        target, draft = lineage.versions
        return Finding("StaleDraft", domain, "info", {
            "resolved_by": f"target {target}, draft {draft}",
            "acceptance_after": f"{lineage.flags.mean:.3f}"}, "stale-draft", resolves=True)

    def forget(self, domain: str) -> "DriftWatch":
        """Drop ``domain``'s detectors and lineages (evicted while idle); a return starts them afresh."""
        self._domains.pop(domain, None)
        return self

    def version_test(self, domain: str) -> SequentialTest | None:
        """The stale-draft test of the domain's current versions (None before any version change)."""
        d = self._domains.get(domain)
        return d.current.test if d is not None and d.current is not None else None

    def statistics(self) -> dict[tuple[str, str], float]:
        """(domain, detector name) -> current statistic of the domain's current lineage."""
        out = {}
        for domain, d in list(self._domains.items()):
            if d.current is not None:
                for name, value in d.current.statistics().items():
                    out[(domain, name)] = value
        return out


def _observe_tokens(lineage: Lineage, k: int, accepted: int, rejected: int) -> list:
    """An aggregate's tokens (DriftWatch.observe) as steps of K, laid out with the most variance the totals
    allow (steps that accepted all K, one partial step, steps that accepted none) in an order shuffled by a
    generator seeded with the totals (deterministic). Per-token counts of real steps are over-dispersed
    (a rejection takes the step's later tokens with it) and requests differ; the detectors learn that
    dispersion from block means of a few steps, which an even spread of the tokens would hide, making them
    alarm on ordinary variation. Returns the detectors that fired, each once."""
    drafted = accepted + rejected
    sizes = [k] * (drafted // k) + ([drafted % k] if drafted % k else [])  # a short step: fewer drafted
    steps, left = [], accepted
    for size in sizes:
        ones = min(size, left)
        steps.append((ones, size))
        left -= ones
    random.Random(drafted * 1_000_003 + accepted).shuffle(steps)
    fired: list = []
    for ones, size in steps:
        # one step: its accepted tokens and first rejection at once, later rejected tokens one flag each
        for i in range(size - ones if ones < size else 1):
            for detector in lineage.observe(0 if i else ones, 1 if ones < size else 0, None):
                if detector not in fired:
                    fired.append(detector)
    return fired
