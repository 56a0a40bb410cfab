"""Relaying an engine's answer to the client as it comes, chunk by chunk (server-sent events are scanned for
``timings`` on the way, never held back; a whole JSON answer is copied up to a bound to read its ``timings``
at the end), then taking the request's record from those timings."""

from __future__ import annotations

import asyncio
import logging
import time

import aiohttp

from agent.proxy import asgi, domains
from agent.proxy.failover import describe
from agent.proxy.pools import Pool
from agent.proxy.timings import Served, SSETimings, aggregate, body_timings
from specwatch_core.records import RecordError

log = logging.getLogger("specwatch.proxy")
HOP_BY_HOP = frozenset((b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te",
                        b"trailer", b"trailers", b"transfer-encoding", b"upgrade", b"host", b"content-length",
                        domains.HEADER.encode()))


async def relay(send: asgi.Send, answer: aiohttp.ClientResponse, pool: Pool, served: Served | None,
                watch: asgi.Disconnect, proxy) -> str:
    """Relay the engine's answer as it comes; at the end, record the request's timings into
    ``proxy.sidecar``. The result to count (agent/proxy/metrics.py)."""
    status = answer.status
    head = [(k, v) for k, v in answer.raw_headers if k.lower() not in HOP_BY_HOP or k.lower() == b"content-length"]
    head.append((b"x-specwatch-pool", pool.name.encode()))
    kind = answer.headers.get("content-type", "")
    watched = served is not None and status < 400 and "content-encoding" not in answer.headers
    scanner = SSETimings() if watched and kind.startswith("text/event-stream") else None
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
        scanner.close()
        return record(scanner.timings, served, proxy.sidecar)
    return record(body_timings(bytes(copy)) if copy is not None else None, served, proxy.sidecar)


def record(timings: dict | None, served: Served, sidecar) -> str:
    try:
        found = aggregate(timings, served, time.time())
    except RecordError as exc:
        log.warning("pool %s: engine timings refused: %s", served.pool, exc)
        return "refused"
    if found is None:
        return "untimed"
    sidecar.record(found)
    return "recorded"
