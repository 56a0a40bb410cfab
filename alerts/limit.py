"""A sliding-window rate limit on new notifications, per key (alertname, domain)."""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable


class RateLimit:
    """At most ``limit`` events per key in any ``interval`` seconds; ``limit=None`` allows everything."""

    def __init__(self, limit: int | None, interval: float):
        self.limit = limit
        self.interval = interval
        self._events: dict[Hashable, deque[float]] = {}

    def allow(self, key: Hashable, now: float) -> bool:
        """Whether an event for ``key`` may happen at ``now``; counts it if so."""
        if self.limit is None:
            return True
        events = self._events.setdefault(key, deque())
        while events and events[0] <= now - self.interval:
            events.popleft()
        if len(events) >= self.limit:
            return False
        events.append(now)
        return True

    def forget(self, now: float) -> None:
        """Drop keys with no event in the window, so the table stays as small as the active keys."""
        for key in [k for k, events in self._events.items() if not events or events[-1] <= now - self.interval]:
            del self._events[key]
