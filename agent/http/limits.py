"""What the API refuses rather than queue without bound: ingest while the store cannot take more, and
POST /v1/generate beyond its concurrency and queue. A refusal is a ``Busy`` (503 or 429 with Retry-After),
counted in the registry /metrics exports; nothing from a refused request is kept. The bounds are a
``Limits`` (agent/runtime/options.py), as the sidecar's configuration hands them out."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from prometheus_client import CollectorRegistry, Counter

from agent.hub.ingest import IngestFull
from agent.runtime.options import Limits

T = TypeVar("T")


class Busy(Exception):
    """Refused for now; ``status`` (503 or 429) and ``retry_after`` seconds go in the answer."""

    def __init__(self, message: str, status: int, retry_after: int):
        super().__init__(message)
        self.status, self.retry_after = status, retry_after


class Refusals:
    """``specwatch_ingest_refused_total{reason}`` (records) and ``specwatch_generate_refused_total``
    (requests) in ``registry``; an app made twice over one registry shares them."""

    def __init__(self, registry: CollectorRegistry):
        self.ingest = _counter(registry, "specwatch_ingest_refused", "Records refused by POST /v1/steps "
                               "(503 + Retry-After) because the store could not take more.", ("reason",))
        self.generate = _counter(registry, "specwatch_generate_refused",
                                 "POST /v1/generate requests refused (429 + Retry-After): cap and queue full.")


def _counter(registry: CollectorRegistry, name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
    try:
        return Counter(name, doc, labels, registry=registry)
    except ValueError:  # registered by an earlier app over this registry
        return registry._names_to_collectors[name + "_total"]  # type: ignore[attr-defined]


class IngestGate:
    """Hands validated batches to the sidecar without ever blocking the caller: when the store holds
    ``max_unwritten`` unwritten rows or the ingest queue is full, Busy(503) and nothing is kept."""

    def __init__(self, sidecar: Any, limits: Limits, refusals: Refusals):
        self.sidecar, self.limits, self.refusals = sidecar, limits, refusals

    def record(self, steps: Sequence[Any]) -> int:
        unwritten = getattr(self.sidecar.store, "unwritten", 0)
        if unwritten >= self.limits.max_unwritten:
            self._refuse(steps, "unwritten_cap", f"the store holds {unwritten} unwritten window rows "
                         f"(at most {self.limits.max_unwritten}): the database is behind or away")
        try:
            return self.sidecar.record_many(steps, block=False)
        except IngestFull as exc:
            self._refuse(steps, "queue_full", f"the ingest queue is full ({exc})")

    def _refuse(self, steps: Sequence[Any], reason: str, message: str) -> None:
        self.refusals.ingest.labels(reason).inc(len(steps))
        raise Busy(f"{message}; nothing from this request was kept, retry later", 503, self.limits.retry_after)


class GenerateGate:
    """At most ``generate_concurrency`` decodes at once on threads of their own (not the shared request
    threadpool, so the other routes keep answering), ``generate_queue`` more waiting; beyond, Busy(429)."""

    def __init__(self, limits: Limits, refusals: Refusals):
        self.limits, self.refusals = limits, refusals
        self.admitted = 0  # running or waiting; touched only on the event loop
        self._limiter: tuple[Any, anyio.CapacityLimiter] | None = None

    async def run(self, fn: Callable[[], T]) -> T:
        if self.admitted >= self.limits.generate_concurrency + self.limits.generate_queue:
            self.refusals.generate.inc()
            raise Busy(f"{self.admitted} generate requests running or queued (at most "
                       f"{self.limits.generate_concurrency} + {self.limits.generate_queue})", 429,
                       self.limits.retry_after)
        self.admitted += 1
        try:
            return await anyio.to_thread.run_sync(fn, limiter=self._limiter_of_loop())
        finally:
            self.admitted -= 1

    def _limiter_of_loop(self) -> anyio.CapacityLimiter:
        loop = asyncio.get_running_loop()  # one limiter per event loop (test clients start several)
        if self._limiter is None or self._limiter[0] is not loop:
            self._limiter = (loop, anyio.CapacityLimiter(self.limits.generate_concurrency))
        return self._limiter[1]
