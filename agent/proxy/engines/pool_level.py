"""Pool-level records: where a speculating pool's engine reports nothing per request (TensorRT-LLM; vLLM
without ``--per-request-spec-decode-metrics``), its counters' deltas between two health checks become one
aggregate record of the pool, under the domain ``POOL_DOMAIN``: its requests' domains are not known from the
counters, and the proxy never splits a pool's tokens across domains by guess.

The counters are read with `specwatch scrape`'s page readers (agent/scrape/pages/): drafts (verification
passes with drafts), draft tokens, accepted tokens, and the engine's own step time where its page has it, else
the wall time between the two readings. A restart between two readings (a new ``_created``, a counter going
down) starts over from the new counts, as Prometheus' ``increase()`` does.
"""

from __future__ import annotations

from agent.proxy.engines.base import Served
from agent.scrape.pages import PageError, SpecCounters, read_page
from specwatch_core.records import StepRecord

POOL_DOMAIN = "(pool-level)"


class PoolCounters:
    """One pool's last counter reading; ``take(page, now, served)`` gives the record of what happened since."""

    def __init__(self) -> None:
        self._last: SpecCounters | None = None
        self._at: float | None = None
        self.first: SpecCounters | None = None  # the first reading: records count from there
        self.problem: str | None = None  # why the last reading gave no record (logged once while it lasts)

    def take(self, page: str, now: float, served: Served) -> StepRecord | None:
        """The pool-level record since the last reading (None: the first reading, nothing drafted since, or
        a restart). PageError when the page has no speculation counters; RecordError naming the field when
        the delta does not fit the pool's K."""
        try:
            found = read_page(page)
        except PageError:
            if self._last is not None:
                raise
            found = []  # TensorRT-LLM writes its counters with the first finished request: nothing yet
        counters = found[0].counters if found else SpecCounters(0, 0, 0, None)
        for series in found[1:]:  # several engine indexes or ranks of one pool: their sum
            c = series.counters
            counters = SpecCounters(counters.drafts + c.drafts, counters.draft_tokens + c.draft_tokens,
                                    counters.accepted + c.accepted, None, counters.created,
                                    None if counters.seconds is None or c.seconds is None
                                    else counters.seconds + c.seconds)
        last, at = self._last, self._at
        self._last, self._at = counters, now
        self.first = self.first or counters
        if last is None:
            return None
        delta = counters.minus(last)
        if delta is None or delta.drafts == 0:
            return None
        if delta.problem() is not None and delta.accepted > delta.draft_tokens:
            raise PageError(f"counters caught mid-update: {delta.problem()}")
        seconds = delta.seconds if delta.seconds is not None and delta.seconds > 0 else max(now - at, 1e-6)
        record = StepRecord(
            domain=POOL_DOMAIN, lookahead=served.lookahead, accepted=delta.accepted,
            emitted=delta.accepted + delta.drafts, draft_seconds=0.0, verify_seconds=0.0,
            seconds=min(seconds, 3599.0), steps=delta.drafts, drafted=delta.draft_tokens, pool=served.pool,
            target_version=served.target_version, draft_version=served.draft_version, timestamp=now,
            pod=served.pod)
        return record.validate()
