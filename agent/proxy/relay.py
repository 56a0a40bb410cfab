"""Relaying an engine's answer to the client as it comes, chunk by chunk (server-sent events are scanned for
the event carrying the engine's figures on the way, never held back; a whole JSON answer is copied up to a
bound to read its figures at the end), then taking the request's record from those figures with the pool's
engine adapter (agent/proxy/engines/)."""

from __future__ import annotations

import asyncio
import logging
import time

import aiohttp

from agent.proxy import asgi, domains, engines
from agent.proxy.engines.base import Missing, Served, record as make_record
from agent.proxy.engines.sse import LastEvent, whole
from agent.proxy.failover import describe
from agent.proxy.pools import Pool
from specwatch_core.records import RecordError

log = logging.getLogger("specwatch.proxy")
HOP_BY_HOP = frozenset((b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te",
                        b"trailer", b"trailers", b"transfer-encoding", b"upgrade", b"host", b"content-length",
                        domains.HEADER.encode()))


async def relay(send: asgi.Send, answer: aiohttp.ClientResponse, pool: Pool, served: Served | None,
                watch: asgi.Disconnect, proxy, started: float | None = None) -> str:
    """Relay the engine's answer as it comes; at the end, record the request's figures into
    ``proxy.sidecar``. The result to count (agent/proxy/metrics.py). ``started``: when the request was sent
    (perf_counter), for engines that do not time their answers."""
    status = answer.status
    head = [(k, v) for k, v in answer.raw_headers if k.lower() not in HOP_BY_HOP or k.lower() == b"content-length"]
    head.append((b"x-specwatch-pool", pool.name.encode()))
    kind = answer.headers.get("content-type", "")
    watched = served is not None and status < 400 and "content-encoding" not in answer.headers
    engine = pool.engine or engines.DEFAULT
    scanner = LastEvent(engine.MARKER) if watched and kind.startswith("text/event-stream") else None
    copy = bytearray() if watched and scanner is None else None
    limit = proxy.config.max_record_body
    await send({"type": "http.response.start", "status": status, "headers": head})
    content = answer.content
    try:
        while chunk := await content.readany():
            if scanner is not None:
                scanner.feed(chunk)
            elif copy is not None:
                if len(copy) + len(chunk) <= limit:
                    copy += chunk
                else:
                    copy = None
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
    except asyncio.TimeoutError:
        log.warning("pool %s: no chunk within %g s; answer cut off", pool.name, proxy.config.read_seconds)
        return "timeout"  # the response stays incomplete: uvicorn closes the client's connection
    except aiohttp.ClientError as exc:
        log.warning("pool %s: answer broken off: %s", pool.name, describe(exc))
        return "connect_error"
    watch.finish()
    await send({"type": "http.response.body", "body": b"", "more_body": False})
    pool.answered = pool.answered or status < 500  # it is up: the next health check may pass it by
    if status >= 400:
        return "engine_error"
    if not watched:
        return "untimed"
    if scanner is not None:
        found = scanner.close()
        if scanner.error:
            return "engine_error"
    else:
        found = whole(bytes(copy)) if copy is not None else None
    elapsed = None if started is None else time.perf_counter() - started
    return record(found, served, proxy.sidecar, pool, elapsed, streamed=scanner is not None, metrics=proxy.metrics)


def record(answer: dict | None, served: Served, sidecar, pool: Pool, elapsed: float | None = None,
           streamed: bool = False, metrics=None) -> str:
    """Record the request from its answer (or the streamed event carrying its figures) with the pool's
    adapter, and count its per-position acceptance in ``metrics`` where the engine gives it. A figure the
    engine did not send is logged once per pool (Pool.lacks), not per request."""
    engine = pool.engine or engines.DEFAULT
    try:
        figures = engine.figures(answer if answer is not None else ({"choices": []} if streamed else {}),
                                 served.lookahead)
        found = None if figures is None else make_record(figures, served, time.time(), elapsed)
    except Missing as exc:
        pool.lacks(exc)
        return "unreported"
    except RecordError as exc:
        log.warning("pool %s: engine figures refused: %s", served.pool, exc)
        return "refused"
    if found is None:
        return "untimed"
    sidecar.record(found)
    if metrics is not None and figures.per_position is not None and figures.verified:
        metrics.count_positions(served.pool, figures.per_position, figures.verified)
    return "recorded"
