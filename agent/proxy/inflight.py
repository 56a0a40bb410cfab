"""Requests in flight over time: the load a request met over its life, and the load the next one will meet.

A request sent at the start of a burst finds nobody in flight and then decodes beside every request sent
after it; one sent last before a lull finds many and ends alone. The count when it is sent says neither, so
each meter keeps the time integral of its count A(t) = integral of n(u) du (n changes only when a request
enters or leaves, so A grows by n x dt between changes), and a request that ran from t0 to t1 met

    load = (A(t1) - A(t0)) / (t1 - t0)    (itself included: it was in flight the whole time),

rounded to the nearest whole request, at least 1. Four requests sent together to an idle pool, each
decoding 4 s, met 4 each (the count when sent: 1, 2, 3, 4).

The load the next request will meet is at least the count now plus itself; where the load is the clients'
(pools sharing one machine meet all of it, however the proxy routes), it is what the last requests met over
their lives in a steady stream (the median of the last ``RECENT`` that ended within ``FRESH`` seconds), so
the first request of a burst is scored at the load the burst will reach, not alone (``ahead``). A pool of its
own meets the load the routing gives it: its count now.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

RECENT = 8  # lifetime loads the next request's load is read from
FRESH = 60.0  # seconds a lifetime load counts for that


class InFlight:
    """One meter: a pool's requests, or every pool's where the pools share one machine."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.count = 0
        self._area, self._at = 0.0, clock()
        self._met: deque[tuple[float, int]] = deque(maxlen=RECENT)  # (ended at, load met)

    def _advance(self) -> float:
        now = self.clock()
        self._area += self.count * max(now - self._at, 0.0)
        self._at = now
        return now

    def enter(self) -> "Met":
        """A request starts: counted from now on; returns what measures the load it meets."""
        now = self._advance()
        self.count += 1
        return Met(self, self._area, now, self.count)

    def leave(self, met: "Met | None" = None) -> None:
        """A request ended (``met``: its ``enter``'s, so its lifetime load counts toward the next one's)."""
        if met is not None:
            self._met.append((self.clock(), met.load()))
        self._advance()
        self.count = max(self.count - 1, 0)

    def area(self) -> tuple[float, float]:
        """(A(now), now)."""
        now = self._advance()
        return self._area, now

    def ahead(self) -> int:
        """The load a request sent now will meet: the count now plus itself, or what the last requests met
        over their lives where that is more (those ended within ``FRESH`` seconds)."""
        now = self.clock()
        recent = [load for ended, load in self._met if now - ended <= FRESH]
        typical = int(statistics.median_low(recent)) if recent else 0
        return max(self.count + 1, typical)


@dataclass(slots=True)
class Met:
    """The load one request meets, from its start on a meter."""

    meter: InFlight
    area: float
    at: float
    sent: int  # the count when it was sent, it included

    def load(self) -> int:
        """The mean count over the request's life so far, rounded, at least 1 (the count when sent for a
        request of no measurable length)."""
        area, now = self.meter.area()
        if now - self.at <= 0:
            return self.sent
        return max(1, int((area - self.area) / (now - self.at) + 0.5))
