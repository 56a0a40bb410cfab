"""One upstream pool and what the proxy knows about it: health, engine, lookahead, versions, and which of its
engine's per-request figures its answers lack.

What an answer lacks is reported once per pool and field (``lacks``), whether the start check found it
(agent/proxy/startcheck.py) or an answer showed it: never once per request. When the engine's own
per-request figures are what is lacking (``MISSING`` of its adapter: a start-up flag is off, or the engine
never reports them) and the engine has speculation counters, the pool gets pool-level records from them
(agent/proxy/engines/pool_level.py) until the figures come back (``carries``). A field a client leaves out
of its own request (vLLM's streamed usage, SGLang's ``return_meta_info``) is reported too, but the pool's
other requests keep their per-request records, so its counters are never read on top of them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from agent.proxy.config import Upstream
from agent.proxy.engines.base import Missing, Served
from agent.proxy.engines.pool_level import PoolCounters
from agent.proxy.inflight import InFlight

log = logging.getLogger("specwatch.proxy")


@dataclass
class Pool:
    """One upstream and what the last check found."""

    upstream: Upstream
    lookahead: int
    healthy: bool = False
    target_version: str | None = None
    draft_version: str | None = None
    checked: float | None = None
    error: str | None = "not checked yet"
    answered: bool = False  # an answer came back from it since its last check
    skipped: int = 0  # rounds skipped in a row because it was answering
    engine: object = None  # its adapter module (agent/proxy/engines/), found by the first passing check
    lacking: dict[str, str] = field(default_factory=dict)  # field its answers lack -> how to turn it on
    counters: PoolCounters | None = None  # pool-level records from its counters (while its figures lack)
    meter: InFlight = field(default_factory=InFlight)  # its inspected requests not ended yet, over time
    pages: dict = field(default_factory=dict)  # the engine's pages as the last check read them
    starting: object = None  # the start check under way (an asyncio task), None when none is

    @property
    def inflight(self) -> int:
        """Inspected requests the proxy has sent it that have not ended yet."""
        return self.meter.count

    @property
    def name(self) -> str:
        return self.upstream.name

    @property
    def base(self) -> str:
        return self.upstream.base

    @property
    def missing(self) -> str | None:
        """What its answers lack and how to turn it on, None when nothing is known to lack."""
        return "; ".join(f"{f} ({hint})" for f, hint in self.lacking.items()) or None

    @property
    def records(self) -> str:
        """How the pool's speculation is recorded: per request, pool-level, or not at all."""
        if self.counters is not None:
            return "pool-level"
        own = getattr(self.engine, "MISSING", None)
        return "none" if own and own[0] in self.lacking else "per-request"

    def view(self) -> dict:
        return {"name": self.name, "url": self.base, "lookahead": self.lookahead, "healthy": self.healthy,
                "target_version": self.target_version, "draft_version": self.draft_version,
                "checked": self.checked, "error": self.error, "inflight": self.inflight,
                "engine": None if self.engine is None else self.engine.NAME, "missing": self.missing,
                "records": self.records}

    def served(self, draft_version: str, pod: str | None = None) -> Served:
        """What a pool-level record of this pool carries (no domain: see agent/proxy/engines/pool_level.py)."""
        return Served("", self.name, self.lookahead, self.target_version or "unknown", draft_version, None, pod)

    def lacks(self, missing: Missing, at_start: bool = False) -> bool:
        """The pool's answers lack a figure: logged the first time for that field (True), then only counted."""
        if self.lacking.get(missing.field) == missing.hint:
            return False
        self.lacking[missing.field] = missing.hint
        own = getattr(self.engine, "MISSING", None)
        if own and missing.field == own[0] and self.lookahead > 0 and self.engine.COUNTERS:
            self.counters = self.counters or PoolCounters()
        if self.counters is not None and missing.field == own[0]:
            how = f"pool-level records from {self.engine.COUNTERS} instead, never split across domains"
        elif own and missing.field == own[0]:
            how = "its requests are served and not recorded"
        else:
            how = "those requests are served and not recorded; the pool's others are"
        log.warning("pool %s (%s): %s lack %s (%s): %s", self.name, getattr(self.engine, "TITLE", "engine"),
                    "found at start: its answers" if at_start else "answers", missing.field, missing.hint, how)
        return True

    def carries(self) -> None:
        """The start check found the engine's per-request figures in its answers: per-request records again."""
        own = getattr(self.engine, "MISSING", None)
        if own and self.lacking.pop(own[0], None) is not None:
            log.info("pool %s (%s): answers carry %s again; per-request records", self.name, self.engine.TITLE,
                     own[0])
        self.counters = None
