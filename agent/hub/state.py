"""What the Sidecar's hot path (agent/hub/sidecar.py) and its maintenance jobs (agent/hub/upkeep.py) share:
the store, the policy and the optional parts they feed, the domains with state, the decisions handed out,
and what waits for the flush. One lock guards the policy, the watch, the slots and every map here; the
hot path holds it only around the policy and the watch, the jobs only to copy or swap (never during I/O
or a fit's computation)."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from agent.hub.domains import DomainSlots
from agent.hub.parts import Alerts, Metrics, Watch
from policies.base import Decision, Policy
from policies.switch import Switch, Transition, switch_of
from storage import Store


@dataclass(eq=False)
class HubState:
    store: Store
    policy: Policy
    slots: DomainSlots
    pod: str = "local"
    clock: Callable[[], float] = time.time
    watch: Watch | None = None
    alerts: Alerts | None = None
    metrics: Metrics | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Switch transitions, appended under the lock by the switch inside policy.update: ``fresh`` until turned
    # into alerts (the flush or the alert job), ``unwritten`` until the flush wrote them (retried on failure).
    fresh: deque[tuple[float, Transition]] = field(default_factory=deque)
    unwritten: deque[tuple[float, Transition]] = field(default_factory=deque)
    latest: dict[str, Decision] = field(default_factory=dict)  # state key -> last handed out or readied
    unlogged: dict[str, tuple[float, Decision]] = field(default_factory=dict)  # not yet written, when first out
    ready: dict[str, tuple[str, Decision]] = field(default_factory=dict)  # domain -> readied by the worker
    versions: dict[str | None, tuple[str, str]] = field(default_factory=dict)  # pod -> (target, draft) seen
    version_changes: deque[tuple[str, str, str | None, float]] = field(default_factory=deque)

    def __post_init__(self) -> None:
        self.switch: Switch | None = switch_of(self.policy)
        if self.switch is not None:
            self.switch.subscribe(self._on_transition)

    def _on_transition(self, t: Transition) -> None:
        # Called by the switch inside policy.update, under the lock: queue only.
        item = (self.clock(), t)
        self.fresh.append(item)
        self.unwritten.append(item)

    def stamp(self, key: str, decision: Decision) -> None:
        """``decision`` handed out (or readied) for ``key``: the latest, and queued for the flush stamped when
        first handed out (policies reuse the object). The caller holds the lock."""
        self.latest[key] = decision
        pending = self.unlogged.get(key)
        if pending is None or pending[1] is not decision:
            self.unlogged[key] = (self.clock(), decision)

    def latest_of(self, domain: str) -> tuple[str, Decision] | None:
        """(state key, decision) last handed out or readied for ``domain``'s state; None for a new domain."""
        key = self.slots.key(domain)
        decision = self.latest.get(key) if key is not None else None
        return (key, decision) if decision is not None else None

    def forget(self, domain: str) -> None:
        """Drop an evicted domain's decisions (the caller holds the lock); its unwritten decision too, which
        would revive its gauges."""
        self.latest.pop(domain, None)
        self.ready.pop(domain, None)
        self.unlogged.pop(domain, None)

    def seed(self, found: dict[str, tuple[list, bool | None]], take: Callable[[str], bool]) -> list[str]:
        """Warm-start the policy (and switch) with ``found`` (domain -> (arms, on)) for the domains ``take``
        accepts (called under the lock); returns them."""
        seeded = []
        with self.lock:
            for domain in sorted(found):
                if take(domain):
                    arms, on = found[domain]
                    self.policy.warm_start(*(domain, arms, on)[: 3 if self.switch is not None else 2])
                    seeded.append(domain)
        return seeded
