"""Sidecar: the in-process wiring of specwatch, the two entry points of the data path.

``record`` / ``record_many`` take StepRecords: the batch is validated as a whole first (a bad one leaves no
trace anywhere), then counted in the store's window sums, the metrics, the drift watch and the policy.
``decide`` asks the policy (behind its on/off switch) for the next lookahead of a domain.

With ``background=True`` (``specwatch serve`` and the demo; bench/overhead_insitu.py compares it with inline)
the caller's thread does almost nothing: ``record`` appends the step to a queue, and a worker thread
(agent/hub/ingest.py) validates it (a bad record is logged, counted in ``rejected`` and kept nowhere), feeds
every branch, then asks the policy for the domain's next decision, which ``decide`` takes without the lock;
while the worker has records in hand and none is readied, ``decide`` hands out the domain's latest again
rather than wait for the worker's lock (a step or two behind, never missing); with nothing in hand (the ring
reader, an HTTP client between batches) it asks the policy, a fresh choice per call. A decoder in another
process reaches the same path through the step ring (agent/ring/reader.py: ``take``, ``decide``,
``stop_state``). ``record_many`` (the HTTP route) still validates the whole batch on the caller's thread, so
a bad request is refused with the field named. ``flush`` first waits for the worker, so a flush writes every
record recorded before it. Neither entry point does I/O: switch transitions, decisions and version changes
are queued and written by ``flush``, which the scheduler runs every second; fits run in ``refit``, idle
domains are evicted in ``tend_domains``, other scheduler jobs. Thread-safe: one lock, held only around the
policy and the watch, which are not (and never during a fit's computation).

Records without timing (draft and verify seconds both 0, as ``specwatch scrape`` makes: it cannot know
costs) are stored, counted in metrics and watched, but not given to the policy: its goodput estimates
are tokens per second of step time.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from agent.hub import memory
from agent.hub.domains import DEFAULT_IDLE, OTHER, Defaults, DomainSlots
from agent.hub.ingest import Ingest
from agent.hub.transition_alerts import alert_transitions
from agent.hub.warm import DEFAULT_LOOKBACK, returning_history, stored_history
from policies.base import Decision, Outcome, Policy, StopDrafting, StopState, has_refits
from policies.switch import Transition, switch_of
from specwatch_core.records import RecordError, StepRecord, verify_seconds_of
from storage import Store

log = logging.getLogger(__name__)

INGEST_WAIT = 5.0  # seconds a flush or shutdown waits for the ingest worker to catch up
MAX_PODS = 64  # pods whose model versions are tracked for change times (the flush notes all of them anyway)


class Sidecar:
    """See the module docstring. ``watch`` (alerts.watch.DriftWatch), ``alerts`` (alerts.manager.AlertManager)
    and ``metrics`` (alerts.metrics.export.Metrics) are optional: None leaves that branch of the data path out.
    Domains (agent/hub/domains.py): only records create one; ``decide`` on a domain without state answers the
    decision a new domain starts with; ``tend_domains`` evicts those idle ``domain_idle_seconds``.
    ``cap_stored_domains``: records that ``take`` feeds (the ingest worker's, the ring's) are stored under
    their state key too, so a domain beyond ``max_domains`` is stored as ``other``, as the metrics label it;
    ``stored_as_other`` counts them."""

    def __init__(self, store: Store, policy: Policy, *, watch: Any = None, alerts: Any = None,
                 metrics: Any = None, pod: str = "local", clock: Callable[[], float] = time.time,
                 max_domains: int = 32, background: bool = False, domain_idle_seconds: float = DEFAULT_IDLE,
                 cap_stored_domains: bool = False):
        self._slots = DomainSlots(max_domains, domain_idle_seconds)
        self._defaults = Defaults(policy)
        self.store, self.policy = store, policy
        self.watch, self.alerts, self.metrics = watch, alerts, metrics
        self.pod, self.max_domains = pod, max_domains  # max_domains validated by DomainSlots
        self._clock = clock
        self._lock, self._flush_lock = threading.Lock(), threading.Lock()
        # Appended under the lock, drained by flush: alerts first, then the database (retried on failure).
        self._fresh: deque[tuple[float, Transition]] = deque()
        self._unwritten: deque[tuple[float, Transition]] = deque()
        self._decisions: dict[str, tuple[float, Decision]] = {}
        self._latest: dict[str, Decision] = {}  # state key -> decision last handed out or readied (``latest``)
        self._versions: dict[str | None, tuple[str, str]] = {}
        self._version_changes: deque[tuple[str, str, str | None, float]] = deque()
        self.last_flush: float | None = None
        self.flush_error: str | None = None
        self.switch = switch_of(policy)
        if self.switch is not None:
            self.switch.subscribe(self._on_transition)
        self.ingest = Ingest(self._ingest) if background else None
        self._ready: dict[str, tuple[str, Decision]] = {}  # domain -> (state key, decision) from the worker
        self.rejected = 0  # records refused by ``take`` (the ingest worker's and the ring reader's)
        self.cap_stored_domains, self.stored_as_other = cap_stored_domains, 0

    # -- hot path ------------------------------------------------------------------------------------
    def record(self, step: StepRecord) -> None:
        """One step: validated (RecordError naming the field; nothing kept), then fed to every branch. In
        background mode only queued: the worker validates it (a bad one is logged and counted in ``rejected``)."""
        ingest = self.ingest
        if ingest is not None:  # validated by the worker
            ingest.put(step)
            return
        self.store.record(step)
        self._observe((step,))

    def record_many(self, steps: Sequence[StepRecord], block: bool = True) -> int:
        """Validate the whole batch (RecordError naming index and field; nothing kept), then feed every
        branch of the data path. Returns the number of records taken. ``block=False``: IngestFull rather
        than wait while the ingest queue is full (nothing kept)."""
        steps = list(steps)
        if self.ingest is not None:
            self.store.validate_records(steps)
            self.ingest.put(tuple(steps), block=block)  # one item: a batch validated already
            return len(steps)
        self.store.write_records(steps)
        self._observe(steps)
        return len(steps)

    def take(self, steps: Sequence[StepRecord | tuple[StepRecord, ...]]) -> set[str]:
        """Feed records checked one by one, on the caller's thread: a bad one is logged, counted in
        ``rejected`` and kept nowhere, the rest go on (tuples are batches validated already). The ring
        reader (agent/ring/reader.py) and the ingest worker use it. Returns the domains fed."""
        good: list[StepRecord] = []
        for s in steps:
            if type(s) is tuple:
                good += s
                continue
            try:
                self.store.validate(s)
            except (RecordError, AttributeError, TypeError) as exc:
                self.rejected += 1
                log.error("record refused (%d so far): %s", self.rejected, exc)
                continue
            good.append(s)
        if not self.cap_stored_domains:
            self.store.count_validated(good)
            self._observe(good)
            return {s.domain for s in good}
        keys = self._observe(good)
        stored = [s if key == s.domain else dataclasses.replace(s, domain=key) for s, key in zip(good, keys)]
        self.stored_as_other += sum(1 for s, key in zip(good, keys) if key != s.domain)
        self.store.count_validated(stored)
        return {s.domain for s in good}

    def _ingest(self, steps: list[StepRecord | tuple[StepRecord, ...]]) -> None:
        """The worker's side of ``background``: feed what came, ready the next decisions."""
        domains = self.take(steps)
        with self._lock:
            for domain in domains:
                key = self._slots.key(domain)
                if key is None:  # evicted meanwhile (``tend_domains``): its next record admits it again
                    continue
                decision = self.policy.choose(key)
                self._stamp(key, decision)
                if key == domain:  # a domain sharing ``other`` reads other's latest: no entry per name
                    self._ready[domain] = (key, decision)

    def _observe(self, steps: Sequence[StepRecord]) -> list[str]:
        """Metrics, policy, watch and alerts for validated records (counted in the store before or after);
        each record's state key."""
        findings, keys = [], []  # keys: each record's state key (its domain, or other)
        with self._lock:
            now = self._clock()
            for s in steps:
                key, found = self._feed(s, now)
                keys.append(key)
                if found:
                    findings += found
        if self.metrics is not None:  # under the state key: the metrics' domain labels follow the slots
            for s, key in zip(steps, keys):
                self.metrics.observe(s, key)
        if findings and self.alerts is not None:
            for finding in findings:
                self.alerts.handle(finding)
        return keys

    def _feed(self, s: StepRecord, now: float) -> tuple[str, list | None]:
        """Policy, watch and version log for one validated step (caller holds the lock): (key, findings)."""
        key = self._slots.admit(s.domain, now)
        verify = verify_seconds_of(s)
        if s.draft_seconds or verify:  # step_seconds > 0; unsplit time is verify time (Outcome.of), no checks
            mask, conf = s.accepted_mask, s.draft_confidence
            self.policy.update(key, Outcome(
                s.lookahead, s.accepted, s.emitted, s.draft_seconds, verify, None if mask is None
                else tuple(mask), None if conf is None else tuple(conf), s.steps, s.seconds, s.drafted))
        found = None
        if self.watch is not None:
            found = self.watch.observe(s if key == s.domain else dataclasses.replace(s, domain=key))
        versions = self._versions
        known = versions.get(s.pod)
        if known is None or known[0] != s.target_version or known[1] != s.draft_version:
            if s.pod in versions or len(versions) < MAX_PODS:
                seen = versions[s.pod] = (s.target_version, s.draft_version)
                self._version_changes.append((*seen, s.pod, s.timestamp or self._clock()))
                if known is not None:  # a new model pair: evidence about the old one must not hold it back
                    self.policy.reconsider()
        return key, found

    def adjust_policy(self, change: Callable[[Policy], object]) -> None:
        """Apply ``change`` to the policy (the proxy restricting its arms to the pools that are up, naming its
        default pool) under the lock, and to the copy that answers domains without state, whose decision is
        then made again: a new domain starts on a pool that is up, the default one when named."""
        with self._lock:
            change(self.policy)
            self._defaults.adjust(change)

    def decide(self, domain: str) -> Decision:
        """The policy's lookahead for the next step of ``domain`` (K = 0: do not speculate)."""
        ready = self._ready.pop(domain, None)  # atomic: the worker made it after the domain's last record
        if ready is None and self.ingest is not None and self.ingest.pending:
            ready = self._latest_of(domain)  # the worker is busy and will ready one: its last, without waiting
        if ready is not None:
            key, decision = ready
        else:
            with self._lock:
                key = self._slots.key(domain)
                if key is None:  # no records yet: no state is created for a name a caller made up
                    return self._defaults.decide(domain)
                decision = self.policy.choose(key)
                self._stamp(key, decision)
        if key != domain:
            decision = dataclasses.replace(decision, reason=f"{decision.reason} (shared state of {OTHER!r}: "
                                                            f"over {self.max_domains} domains)")
        return decision

    def latest(self, domain: str) -> Decision | None:
        """The decision last handed out or readied for ``domain``, without taking it (for displays: a
        ``decide`` would take the decision the ingest worker readied for the domain's next step)."""
        found = self._latest_of(domain)
        return found and found[1]

    def _latest_of(self, domain: str) -> tuple[str, Decision] | None:
        """(state key, decision) last handed out or readied for ``domain``'s state; None for a new domain."""
        key = self._slots.key(domain)
        decision = self._latest.get(key) if key is not None else None
        return (key, decision) if decision is not None else None

    def _stamp(self, key: str, decision: Decision) -> None:
        """Queue ``decision`` for the flush, stamped when first handed out (policies reuse the object);
        the caller holds the lock."""
        self._latest[key] = decision
        pending = self._decisions.get(key)
        if pending is None or pending[1] is not decision:
            self._decisions[key] = (self._clock(), decision)

    def stop_drafting(self, domain: str) -> StopDrafting | None:
        """The policy's in-step stop rule for ``domain`` (in-process decoding only)."""
        with self._lock:
            key = self._slots.key(domain)
            return self.policy.stop_drafting(key) if key is not None else self._defaults.stop_drafting()

    def stop_state(self, domain: str) -> StopState | None:
        """What the stop rule of ``domain`` reads, for a decoder in another process (agent/ring/client.py)."""
        with self._lock:
            key = self._slots.key(domain)
            return self.policy.stop_state(key) if key is not None else self._defaults.stop_state()

    def _on_transition(self, t: Transition) -> None:
        # Called by the switch inside policy.update, under the lock: queue only.
        item = (self._clock(), t)
        self._fresh.append(item)
        self._unwritten.append(item)

    # -- start-up --------------------------------------------------------------------------------------
    def warm_start(self, target_version: str | None = None, draft_version: str | None = None,
                   lookback: float = DEFAULT_LOOKBACK) -> list[str]:
        """Seed the policy (and switch) from stored history of ``target_version`` (default: the latest this
        pod stored); returns the domains seeded."""
        now = self._clock()
        found = stored_history(self.store, self.pod, now, lookback, self.switch is not None, target_version,
                               draft_version)
        return self._seed(found, lambda domain: self._slots.admit(domain, now, note=False) == domain)

    def _seed(self, found: dict[str, tuple[list, bool | None]], take: Callable[[str], bool]) -> list[str]:
        """Warm-start the policy (and switch) with ``found`` (domain -> (arms, on)) for the domains ``take``
        accepts (called under the lock); returns them."""
        seeded = []
        with self._lock:
            for domain in sorted(found):
                if take(domain):
                    arms, on = found[domain]
                    self.policy.warm_start(*(domain, arms, on)[: 3 if self.switch is not None else 2])
                    seeded.append(domain)
        return seeded

    # -- scheduler jobs --------------------------------------------------------------------------------
    def tend_domains(self, now: float | None = None) -> tuple[list[str], list[str]]:
        """Evict domains without a record for ``domain_idle_seconds`` (policy, switch, watch, metrics, decision
        maps; history stays in the database); warm-start those admitted since the last run from history (one
        evicted earlier that came back). Returns (evicted, warm-started)."""
        now = self._clock() if now is None else now
        with self._lock:
            gone = self._slots.idle(now)
            for domain in gone:
                self._slots.drop(domain)
                self.policy.forget(domain)
                if self.watch is not None:
                    self.watch.forget(domain)
                self._latest.pop(domain, None)
                self._ready.pop(domain, None)
                self._decisions.pop(domain, None)  # not yet logged: it would revive the domain's gauges
            admitted = self._slots.take_admitted()
        if self.metrics is not None:  # and labels a record took while its domain was being evicted
            for domain in {*gone, *(d for d in self.metrics.labels() if d not in self._slots)}:
                self.metrics.forget(domain)
        found = returning_history(self.store, self.pod, admitted, switch=self.switch is not None)
        warmed = self._seed(found, self._slots.__contains__)
        if gone or warmed:
            log.info("domains: %d evicted (idle), %d warm-started, %d held", len(gone), len(warmed), len(self._slots))
        memory.settle(self.store, evicted=bool(gone))
        return gone, warmed

    def flush(self, now: float | None = None) -> int:
        """Raise alerts for new switch transitions, write closed windows, transitions, decisions and version
        changes. ``now=math.inf`` writes open windows too (shutdown). Returns windows written."""
        if self.ingest is not None:
            self.ingest.drain(INGEST_WAIT)
        with self._flush_lock:
            alert_transitions(self._fresh, self.alerts)
            self._export_gauges()
            try:
                written = self.store.flush(now)
                self._drain(self._unwritten, lambda ts, t: self.store.record_transition(
                    t.domain, t.speculate, t.reason, ts=ts, pod=self.pod))
                self._write_decisions()
                self._drain(self._version_changes, lambda target, draft, pod, ts: self.store.record_versions(
                    target, draft, ts=ts, pod=pod))
            except Exception as exc:
                self.flush_error = f"{type(exc).__name__}: {exc}"
                raise
            self.flush_error, self.last_flush = None, self._clock()
            return written

    def rollup(self) -> dict[str, int]:
        return self.store.rollup()

    def prune(self) -> dict[str, int]:
        return self.store.prune()

    @property
    def can_refit(self) -> bool:
        """Whether the policy has fits to run off the hot path (``refit``)."""
        has = getattr(self.policy, "has_refits", None)  # a wrapper (Switched) answers for what it wraps
        return bool(has) if has is not None else has_refits(self.policy)

    def refit(self) -> None:
        """Run the policy's due fits: copy their inputs under the lock, fit without it (milliseconds of
        scikit-learn; decide and record go on meanwhile), swap the results in under the lock."""
        prepare = getattr(self.policy, "prepare_refit", None)
        if not callable(prepare):
            with self._lock:  # a policy with only refit(): all of it under the lock
                self.policy.refit()
            return
        with self._lock:
            compute = prepare()
        apply = compute()
        with self._lock:
            apply()

    def tick_alerts(self, now: float | None = None) -> None:
        """Advance the alert lifecycle (pending -> firing, re-sends, persistence) and export firing counts."""
        if self.alerts is None:
            return
        alert_transitions(self._fresh, self.alerts)
        self.alerts.tick(now)
        if self.metrics is not None:
            self.metrics.set_alerts_firing(self.alerts.firing_counts())

    def close(self, alert_timeout: float = 3.0) -> None:
        """Shutdown: write every window (open ones too) and queued event, persist alert state, release the
        database. Each part runs even if an earlier one failed; the first failure is raised at the end."""
        failure: BaseException | None = None
        if self.ingest is not None and not self.ingest.close(INGEST_WAIT):
            log.error("shutdown: the ingest worker did not finish within %.0f s", INGEST_WAIT)
        steps = [lambda: self.flush(math.inf)]
        if self.alerts is not None:
            steps.append(lambda: self.alerts.close(alert_timeout))
        steps.append(lambda: self.store.close(flush=False))
        for step in steps:
            try:
                step()
            except Exception as exc:  # keep closing: persisting alerts matters even if the flush failed
                log.error("shutdown: %s", exc)
                failure = failure or exc
        if failure is not None:
            raise failure

    # -- internals -------------------------------------------------------------------------------------
    @staticmethod
    def _drain(queue: deque, write: Callable[..., Any]) -> None:
        # Only the flush (under its lock) removes items, so peek-write-pop keeps a failed item queued.
        while queue:
            write(*queue[0])
            queue.popleft()

    def _write_decisions(self) -> None:
        with self._lock:
            pending, self._decisions = self._decisions, {}
        try:
            while pending:
                domain, (ts, d) = next(iter(pending.items()))
                self.store.record_decision(domain, d.lookahead, d.speculate, d.policy, d.reason, ts=ts,
                                           pod=self.pod)
                del pending[domain]
        finally:
            if pending:  # keep what was not written unless a newer decision came in meanwhile
                with self._lock:
                    for domain, item in pending.items():
                        self._decisions.setdefault(domain, item)

    def _export_gauges(self) -> None:
        """Decision and drift gauges, once per flush rather than per step (scrapes are seconds apart)."""
        if self.metrics is None:
            return
        with self._lock:
            # The enabled gauge shows the switch's state, not each step's choice: a probe while off (or a
            # K = 0 measurement while on) must not flap it.
            switch = self.switch
            decisions = [(key, d.lookahead, switch.is_on(key) if switch is not None else d.speculate)
                         for key, (_, d) in self._decisions.items()]
            drift = self.watch.statistics() if self.watch is not None else {}
        for key, lookahead, on in decisions:
            self.metrics.set_decision(key, lookahead, on)
        for (domain, detector), value in drift.items():
            self.metrics.set_drift(domain, detector, value)
