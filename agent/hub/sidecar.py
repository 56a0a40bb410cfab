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
import time
from collections.abc import Callable, Collection, Mapping, Sequence

from agent.hub.domains import DEFAULT_IDLE, OTHER, Defaults, DomainSlots
from agent.hub.ingest import Ingest
from agent.hub.parts import Alerts, Metrics, Watch
from agent.hub.state import HubState
from agent.hub.upkeep import INGEST_WAIT, Upkeep  # noqa: F401 - INGEST_WAIT: where callers found it
from agent.hub.warm import DEFAULT_LOOKBACK, stored_history
from policies.base import Decision, Outcome, Policy, StopDrafting, StopState
from specwatch_core.records import RecordError, StepRecord, verify_seconds_of
from storage import Store

log = logging.getLogger(__name__)

MAX_PODS = 64  # pods whose model versions are tracked for change times (the flush notes all of them anyway)


class Sidecar:
    """See the module docstring. ``watch``, ``alerts`` and ``metrics`` (agent/hub/parts.py) are optional:
    None leaves that branch of the data path out. Domains (agent/hub/domains.py): only records create one;
    ``decide`` on a domain without state answers the decision a new domain starts with; ``tend_domains``
    evicts those idle ``domain_idle_seconds``. ``cap_stored_domains``: records that ``take`` feeds (the
    ingest worker's, the ring's) are stored under their state key too, so a domain beyond ``max_domains``
    is stored as ``other``, as the metrics label it; ``stored_as_other`` counts them."""

    def __init__(self, store: Store, policy: Policy, *, watch: Watch | None = None, alerts: Alerts | None = None,
                 metrics: Metrics | None = None, pod: str = "local", clock: Callable[[], float] = time.time,
                 max_domains: int = 32, background: bool = False, domain_idle_seconds: float = DEFAULT_IDLE,
                 cap_stored_domains: bool = False):
        self.state = HubState(store, policy, DomainSlots(max_domains, domain_idle_seconds), pod, clock,
                              watch=watch, alerts=alerts, metrics=metrics)
        self._defaults = Defaults(policy)
        self.store, self.policy = store, policy
        self.watch, self.alerts, self.metrics = watch, alerts, metrics
        self.pod, self.max_domains = pod, max_domains  # max_domains validated by DomainSlots
        self.switch = self.state.switch
        self.ingest = Ingest(self._ingest) if background else None
        self.upkeep = Upkeep(self.state, self.ingest)
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
        state = self.state
        with state.lock:
            for domain in domains:
                key = state.slots.key(domain)
                if key is None:  # evicted meanwhile (``tend_domains``): its next record admits it again
                    continue
                decision = self.policy.choose(key)
                state.stamp(key, decision)
                if key == domain:  # a domain sharing ``other`` reads other's latest: no entry per name
                    state.ready[domain] = (key, decision)

    def _observe(self, steps: Sequence[StepRecord]) -> list[str]:
        """Metrics, policy, watch and alerts for validated records (counted in the store before or after);
        each record's state key."""
        findings, keys = [], []  # keys: each record's state key (its domain, or other)
        with self.state.lock:
            now = self.state.clock()
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
        state = self.state
        key = state.slots.admit(s.domain, now)
        verify = verify_seconds_of(s)
        if s.draft_seconds or verify:  # step_seconds > 0; unsplit time is verify time (Outcome.of), no checks
            mask, conf = s.accepted_mask, s.draft_confidence
            self.policy.update(key, Outcome(
                s.lookahead, s.accepted, s.emitted, s.draft_seconds, verify, None if mask is None
                else tuple(mask), None if conf is None else tuple(conf), s.steps, s.seconds, s.drafted,
                s.prompt_seconds, s.load))
        found = None
        if self.watch is not None:
            found = self.watch.observe(s if key == s.domain else dataclasses.replace(s, domain=key))
        versions = state.versions
        known = versions.get(s.pod)
        if known is None or known[0] != s.target_version or known[1] != s.draft_version:
            if s.pod in versions or len(versions) < MAX_PODS:
                seen = versions[s.pod] = (s.target_version, s.draft_version)
                state.version_changes.append((*seen, s.pod, s.timestamp or state.clock()))
                if known is not None:  # a new model pair: evidence about the old one must not hold it back
                    self.policy.reconsider()
        return key, found

    def adjust_policy(self, change: Callable[[Policy], object]) -> None:
        """Apply ``change`` to the policy (the proxy restricting its arms to the pools that are up, naming its
        default pool) under the lock, and to the copy that answers domains without state, whose decision is
        then made again: a new domain starts on a pool that is up, the default one when named."""
        with self.state.lock:
            change(self.policy)
            self._defaults.adjust(change)

    def decide(self, domain: str, loads: Mapping[int, int] | None = None,
               busy: Collection[int] | None = None) -> Decision:
        """The policy's lookahead for the next step of ``domain`` (K = 0: do not speculate). ``loads``: the
        load the request would meet on the pool of each K (the proxy's requests in flight there, it
        included); a policy that weighs the load (``Policy.load_aware``) decides for it then and there,
        under the lock, instead of taking the decision the ingest worker readied. ``busy``: the pools running
        requests now, where the pools share one machine (None where they do not; ``Policy.choose_at``)."""
        state = self.state
        if loads and self.policy.load_aware:
            with state.lock:
                key = state.slots.key(domain)
                if key is None:
                    return self._defaults.decide(domain, loads, busy)
                decision = self.policy.choose_at(key, loads, busy)
                state.stamp(key, decision)
            return decision if key == domain else self._shared(decision)
        ready = state.ready.pop(domain, None)  # atomic: the worker made it after the domain's last record
        if ready is None and self.ingest is not None and self.ingest.pending:
            ready = state.latest_of(domain)  # the worker is busy and will ready one: its last, without waiting
        if ready is not None:
            key, decision = ready
        else:
            with state.lock:
                key = state.slots.key(domain)
                if key is None:  # no records yet: no state is created for a name a caller made up
                    return self._defaults.decide(domain)
                decision = self.policy.choose(key)
                state.stamp(key, decision)
        return decision if key == domain else self._shared(decision)

    def _shared(self, decision: Decision) -> Decision:
        return dataclasses.replace(decision, reason=f"{decision.reason} (shared state of {OTHER!r}: "
                                                    f"over {self.max_domains} domains)")

    def latest(self, domain: str) -> Decision | None:
        """The decision last handed out or readied for ``domain``, without taking it (for displays: a
        ``decide`` would take the decision the ingest worker readied for the domain's next step)."""
        found = self.state.latest_of(domain)
        return found and found[1]

    def stop_drafting(self, domain: str) -> StopDrafting | None:
        """The policy's in-step stop rule for ``domain`` (in-process decoding only)."""
        with self.state.lock:
            key = self.state.slots.key(domain)
            return self.policy.stop_drafting(key) if key is not None else self._defaults.stop_drafting()

    def stop_state(self, domain: str) -> StopState | None:
        """What the stop rule of ``domain`` reads, for a decoder in another process (agent/ring/client.py)."""
        with self.state.lock:
            key = self.state.slots.key(domain)
            return self.policy.stop_state(key) if key is not None else self._defaults.stop_state()

    # -- start-up --------------------------------------------------------------------------------------
    def warm_start(self, target_version: str | None = None, draft_version: str | None = None,
                   lookback: float = DEFAULT_LOOKBACK) -> list[str]:
        """Seed the policy (and switch) from stored history of ``target_version`` (default: the latest this
        pod stored); returns the domains seeded."""
        state = self.state
        now = state.clock()
        found = stored_history(self.store, self.pod, now, lookback, self.switch is not None, target_version,
                               draft_version)
        return state.seed(found, lambda domain: state.slots.admit(domain, now, note=False) == domain)

    # -- the maintenance jobs (agent/hub/upkeep.py), as the scheduler and shutdown call them ------------
    def flush(self, now: float | None = None) -> int:
        return self.upkeep.flush(now)

    def tend_domains(self, now: float | None = None) -> tuple[list[str], list[str]]:
        return self.upkeep.tend_domains(now)

    def refit(self) -> None:
        self.upkeep.refit()

    def tick_alerts(self, now: float | None = None) -> None:
        self.upkeep.tick_alerts(now)

    def rollup(self) -> dict[str, int]:
        return self.upkeep.rollup()

    def prune(self) -> dict[str, int]:
        return self.upkeep.prune()

    def close(self, alert_timeout: float = 3.0) -> None:
        self.upkeep.close(alert_timeout)

    @property
    def can_refit(self) -> bool:
        return self.upkeep.can_refit

    @property
    def last_flush(self) -> float | None:
        return self.upkeep.last_flush

    @property
    def flush_error(self) -> str | None:
        return self.upkeep.flush_error
