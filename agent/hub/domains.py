"""Which domains have state of their own in the Sidecar, and what an unknown domain is told.

Only records create a domain: ``DomainSlots.admit`` is called for each validated record and gives the
domain one of ``max_domains`` slots (beyond them the shared state of ``other``), stamped with the
sidecar's clock. Reads (``GET /v1/decision``, a decoder's ``decide`` before its first record) go through
``key``, which never admits: a domain without state is answered by ``Defaults`` with the decision a new
domain starts with, computed on a private copy of the policy, so a caller cannot squat slots with made-up
names. A domain with no record for ``idle_seconds`` is listed by ``idle`` for eviction (the Sidecar's
``tend_domains`` drops its state everywhere; its history stays in the database).
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
from collections import deque
from collections.abc import Callable, Collection, Mapping

from policies.base import Decision, Policy, StopDrafting, StopState
from policies.switch import switch_of

log = logging.getLogger(__name__)

OTHER = "other"  # the shared state of domains beyond ``max_domains``
DEFAULT_IDLE = 3600.0  # seconds without a record before a domain's state is evicted
_TEMPLATE_KEY = ""  # the one domain the policy copy ever sees


class DomainSlots:
    """Domain -> the sidecar clock's time of its last record, for at most ``max_domains`` domains.
    Not thread-safe: the Sidecar holds its lock around every call."""

    def __init__(self, max_domains: int, idle_seconds: float = DEFAULT_IDLE):
        if type(max_domains) is not int or max_domains < 1:
            raise ValueError(f"max_domains must be a positive integer, got {max_domains!r}")
        if isinstance(idle_seconds, bool) or not isinstance(idle_seconds, (int, float)) or not idle_seconds > 0:
            raise ValueError(f"domain_idle_seconds must be a positive number of seconds (inf: never evict), "
                             f"got {idle_seconds!r}")
        self.max_domains, self.idle_seconds = max_domains, float(idle_seconds)
        self._seen: dict[str, float] = {}
        self.other = False  # whether a record ever went to the shared state of OTHER
        # Domains admitted since ``take_admitted`` (for a warm start of returning ones); a slot is taken
        # per admission, so between two evictions at most max_domains come in.
        self._admitted: deque[tuple[str, float]] = deque(maxlen=max_domains)

    def __contains__(self, domain: str) -> bool:
        return domain in self._seen

    def __len__(self) -> int:
        return len(self._seen)

    def admit(self, domain: str, now: float, note: bool = True) -> str:
        """The state key for a record of ``domain``: the domain itself (a free slot is taken; its time is
        refreshed), else OTHER. ``note``: remember the admission for ``take_admitted``."""
        seen = self._seen
        if domain in seen:
            seen[domain] = now
            return domain
        if len(seen) < self.max_domains:
            seen[domain] = now
            if note:
                self._admitted.append((domain, now))
            return domain
        self.other = True
        return OTHER

    def key(self, domain: str) -> str | None:
        """The state key of ``domain`` for a read, admitting nothing: the domain if it has a slot, OTHER
        once the slots are full and OTHER has state, else None (no state: answer the default)."""
        if domain in self._seen:
            return domain
        if self.other and len(self._seen) >= self.max_domains:
            return OTHER
        return None

    def idle(self, now: float) -> list[str]:
        """Domains whose last record is more than ``idle_seconds`` before ``now``."""
        if math.isinf(self.idle_seconds):
            return []
        limit = now - self.idle_seconds
        return [d for d, t in self._seen.items() if t < limit]

    def drop(self, domain: str) -> None:
        self._seen.pop(domain, None)

    def take_admitted(self) -> list[tuple[str, float]]:
        """(domain, time) admitted since the last call and still holding their slot."""
        out = [(d, t) for d, t in self._admitted if d in self._seen]
        self._admitted.clear()
        return out


class Defaults:
    """What a domain without state is told: the decision (and stop rule) of a new domain, from a copy of
    the policy taken before it learned anything of this sidecar's traffic. The copy only ever sees one
    domain, so it stays the size of a fresh policy."""

    def __init__(self, policy: Policy):
        switch = switch_of(policy)
        # The copy must not call the switch's listeners (a Sidecar's queue): they are not copied.
        memo = {id(switch._listeners): []} if switch is not None else {}
        try:
            self._policy: Policy | None = copy.deepcopy(policy, memo)
        except Exception as exc:  # a policy that cannot be copied still answers unknown domains
            log.warning("unknown domains get K=%d: the policy cannot be copied (%s)", policy.kmax // 2 or 1, exc)
            self._policy = None
            self.decision = policy.decision(max(1, policy.kmax // 2), "half of kmax")
        else:
            self.decision = self._policy.choose(_TEMPLATE_KEY)

    def adjust(self, change: Callable[[Policy], object]) -> None:
        """Apply ``change`` (``Sidecar.adjust_policy``) to the copy too and make its decision again."""
        if self._policy is not None:
            change(self._policy)
            self.decision = self._policy.choose(_TEMPLATE_KEY)

    def decide(self, domain: str, loads: Mapping[int, int] | None = None,
               busy: Collection[int] | None = None) -> Decision:
        """The new domain's decision; with ``loads`` (``Sidecar.decide``), a load-aware policy's copy decides at
        them (a new domain's first requests, sent at once, are not all sent to one pool of several idle)."""
        d = self.decision
        if loads and self._policy is not None and self._policy.load_aware:
            d = self._policy.choose_at(_TEMPLATE_KEY, loads, busy)
        return dataclasses.replace(d, reason=f"unknown domain {domain!r} (no records yet, or evicted while "
                                             f"idle): the start of a new domain, {d.reason}")

    def stop_drafting(self) -> StopDrafting | None:
        return self._policy.stop_drafting(_TEMPLATE_KEY) if self._policy is not None else None

    def stop_state(self) -> StopState | None:
        return self._policy.stop_state(_TEMPLATE_KEY) if self._policy is not None else None
