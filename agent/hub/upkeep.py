"""The Sidecar's maintenance jobs, off the hot path, each run by the scheduler (agent/runtime/jobs.py):
``flush`` (alerts for switch transitions, gauges, closed windows, transitions, decisions and version changes
written), ``tend_domains`` (idle domains evicted, returning ones warm-started), ``refit`` (the policy's
fits), ``tick_alerts`` (the alert lifecycle), ``rollup`` and ``prune`` (the store's), and ``close`` at
shutdown. They read what the hot path queued in the shared HubState (agent/hub/state.py)."""

from __future__ import annotations

import logging
import math
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from agent.hub import memory
from agent.hub.ingest import Ingest
from agent.hub.state import HubState
from agent.hub.transition_alerts import alert_transitions
from agent.hub.warm import returning_history
from policies.base import has_refits

log = logging.getLogger(__name__)

INGEST_WAIT = 5.0  # seconds a flush or shutdown waits for the ingest worker to catch up


class Upkeep:
    """The jobs over ``state``; ``ingest``: the worker a flush first waits for (None: records are fed on the
    caller's thread). ``last_flush`` / ``flush_error``: when the last flush succeeded, why the last failed."""

    def __init__(self, state: HubState, ingest: Ingest | None = None):
        self.state, self.ingest = state, ingest
        self._flush_lock = threading.Lock()
        self.last_flush: float | None = None
        self.flush_error: str | None = None

    def tend_domains(self, now: float | None = None) -> tuple[list[str], list[str]]:
        """Evict domains without a record for ``domain_idle_seconds`` (policy, switch, watch, metrics, decision
        maps; history stays in the database); warm-start those admitted since the last run from history (one
        evicted earlier that came back). Returns (evicted, warm-started)."""
        s = self.state
        now = s.clock() if now is None else now
        with s.lock:
            gone = s.slots.idle(now)
            for domain in gone:
                s.slots.drop(domain)
                s.policy.forget(domain)
                if s.watch is not None:
                    s.watch.forget(domain)
                s.forget(domain)
            admitted = s.slots.take_admitted()
        if s.metrics is not None:  # and labels a record took while its domain was being evicted
            for domain in {*gone, *(d for d in s.metrics.labels() if d not in s.slots)}:
                s.metrics.forget(domain)
        found = returning_history(s.store, s.pod, admitted, switch=s.switch is not None)
        warmed = s.seed(found, s.slots.__contains__)
        if gone or warmed:
            log.info("domains: %d evicted (idle), %d warm-started, %d held", len(gone), len(warmed), len(s.slots))
        memory.settle(s.store, evicted=bool(gone))
        return gone, warmed

    def flush(self, now: float | None = None) -> int:
        """Raise alerts for new switch transitions, write closed windows, transitions, decisions and version
        changes. ``now=math.inf`` writes open windows too (shutdown). Returns windows written."""
        s = self.state
        if self.ingest is not None:
            self.ingest.drain(INGEST_WAIT)
        with self._flush_lock:
            alert_transitions(s.fresh, s.alerts)
            self.export_gauges()
            try:
                written = s.store.flush(now)
                _drain(s.unwritten, lambda ts, t: s.store.record_transition(
                    t.domain, t.speculate, t.reason, ts=ts, pod=s.pod))
                self._write_decisions()
                _drain(s.version_changes, lambda target, draft, pod, ts: s.store.record_versions(
                    target, draft, ts=ts, pod=pod))
            except Exception as exc:
                self.flush_error = f"{type(exc).__name__}: {exc}"
                raise
            self.flush_error, self.last_flush = None, s.clock()
            return written

    def rollup(self) -> dict[str, int]:
        """Roll up what ended, then pack the fine tiers' hours that are done into blocks."""
        rolled = self.state.store.rollup()
        self.state.store.pack()
        return rolled

    def prune(self) -> dict[str, int]:
        return self.state.store.prune()

    @property
    def can_refit(self) -> bool:
        """Whether the policy has fits to run off the hot path (``refit``)."""
        policy = self.state.policy
        has = getattr(policy, "has_refits", None)  # a wrapper (Switched) answers for what it wraps
        return bool(has) if has is not None else has_refits(policy)

    def refit(self) -> None:
        """Run the policy's due fits: copy their inputs under the lock, fit without it (milliseconds of
        scikit-learn; decide and record go on meanwhile), swap the results in under the lock."""
        s = self.state
        prepare = getattr(s.policy, "prepare_refit", None)
        if not callable(prepare):
            with s.lock:  # a policy with only refit(): all of it under the lock
                s.policy.refit()
            return
        with s.lock:
            compute = prepare()
        apply = compute()
        with s.lock:
            apply()

    def tick_alerts(self, now: float | None = None) -> None:
        """Advance the alert lifecycle (pending -> firing, re-sends, persistence) and export firing counts."""
        s = self.state
        if s.alerts is None:
            return
        alert_transitions(s.fresh, s.alerts)
        s.alerts.tick(now)
        if s.metrics is not None:
            s.metrics.set_alerts_firing(s.alerts.firing_counts())

    def close(self, alert_timeout: float = 3.0) -> None:
        """Shutdown: write every window (open ones too) and queued event, persist alert state, release the
        database. Each part runs even if an earlier one failed; the first failure is raised at the end."""
        s = self.state
        failure: BaseException | None = None
        if self.ingest is not None and not self.ingest.close(INGEST_WAIT):
            log.error("shutdown: the ingest worker did not finish within %.0f s", INGEST_WAIT)
        steps: list[Callable[[], Any]] = [lambda: self.flush(math.inf)]
        if s.alerts is not None:
            steps.append(lambda: s.alerts.close(alert_timeout))
        steps.append(lambda: s.store.close(flush=False))
        for step in steps:
            try:
                step()
            except Exception as exc:  # keep closing: persisting alerts matters even if the flush failed
                log.error("shutdown: %s", exc)
                failure = failure or exc
        if failure is not None:
            raise failure

    def export_gauges(self) -> None:
        """Decision and drift gauges, once per flush rather than per step (scrapes are seconds apart)."""
        s = self.state
        if s.metrics is None:
            return
        with s.lock:
            # The enabled gauge shows the switch's state, not each step's choice: a probe while off (or a
            # K = 0 measurement while on) must not flap it.
            switch = s.switch
            decisions = [(key, d.lookahead, switch.is_on(key) if switch is not None else d.speculate)
                         for key, (_, d) in s.unlogged.items()]
            drift = s.watch.statistics() if s.watch is not None else {}
        for key, lookahead, on in decisions:
            s.metrics.set_decision(key, lookahead, on)
        for (domain, detector), value in drift.items():
            s.metrics.set_drift(domain, detector, value)

    def _write_decisions(self) -> None:
        s = self.state
        with s.lock:
            pending, s.unlogged = s.unlogged, {}
        try:
            while pending:
                domain, (ts, d) = next(iter(pending.items()))
                s.store.record_decision(domain, d.lookahead, d.speculate, d.policy, d.reason, ts=ts, pod=s.pod)
                del pending[domain]
        finally:
            if pending:  # keep what was not written unless a newer decision came in meanwhile
                with s.lock:
                    for domain, item in pending.items():
                        s.unlogged.setdefault(domain, item)


def _drain(queue: deque, write: Callable[..., Any]) -> None:
    # Only the flush (under its lock) removes items, so peek-write-pop keeps a failed item queued.
    while queue:
        write(*queue[0])
        queue.popleft()
