"""Opening a forwarded request upstream, failing over: a pool that cannot be reached is taken out of rotation
at once (not at its next health check) and the request goes to the next-best healthy pool.

A request is sent again only when no byte of the answer exists yet and the engine cannot have begun on it:
the connection was refused or never opened (``NEVER_OPENED``), or it was closed or reset before the
answer's head (``DROPPED``). A dropped kept-alive connection is the usual case of the second (the engine
restarted, or closed it idle while the proxy reused it), so the request is first sent once more to the same
pool on a fresh connection; dropped there too, the pool is down. Nothing is retried once the engine
answered (an error status reaches the client unchanged) or timed out (it may be working on it), and never
after the answer started: the proxy relays as it reads, so a failure then cuts the answer.
"""

from __future__ import annotations

import logging
from typing import Callable

import aiohttp
from yarl import URL

from agent.proxy.pools import Pool, Pools

log = logging.getLogger("specwatch.proxy")
NEVER_OPENED = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)
# ClientOSError: reset while sending the request or waiting for the head (ClientConnectorError, a subclass,
# is caught before it).
DROPPED = (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)


class Unreachable(Exception):
    """No pool could be reached; ``pool`` is the last one tried, ``error`` its failure."""

    def __init__(self, pool: Pool, error: Exception, tried: list[Pool]):
        self.pool, self.error, self.tried = pool, error, tried
        super().__init__(f"pool {pool.name} ({pool.base}): {describe(error)}"
                         + (f" (tried {', '.join(p.name for p in tried)})" if len(tried) > 1 else ""))


class Opener:
    """Sends requests through ``pooled`` (kept-alive connections) and, after a dropped one, through ``fresh``
    (a new connection per request). ``on_failover(from_pool)`` counts a request sent on."""

    def __init__(self, pooled: aiohttp.ClientSession, fresh: aiohttp.ClientSession, pools: Pools,
                 on_failover: Callable[[Pool], None]):
        self.pooled, self.fresh, self.pools, self.on_failover = pooled, fresh, pools, on_failover

    async def open(self, method: str, target: str, headers: list, body: bytes, pool: Pool,
                   next_pool: Callable[[list[Pool]], Pool | None]) -> tuple[aiohttp.ClientResponse, Pool]:
        """The engine's answer (its head read) and the pool that gave it. ``target``: path and query as the
        client sent them; ``next_pool(tried)``: the next-best healthy pool, or None. Unreachable when no pool
        could be reached; asyncio.TimeoutError and other aiohttp errors as the request raised them."""
        tried: list[Pool] = []
        while True:
            url = URL(pool.base + target, encoded=True)
            try:
                try:
                    return await self._send(self.pooled, method, url, headers, body), pool
                except NEVER_OPENED:
                    raise
                except DROPPED:
                    return await self._send(self.fresh, method, url, headers, body), pool
            except NEVER_OPENED + DROPPED as exc:
                tried.append(pool)
                self.pools.failed(pool, f"a request could not reach it: {describe(exc)}")
                found = next_pool(tried)
                if found is None or any(found is p for p in tried):
                    raise Unreachable(pool, exc, tried) from exc
                log.warning("pool %s: %s; request sent on to pool %s", pool.name, describe(exc), found.name)
                self.on_failover(pool)
                pool = found

    @staticmethod
    def _send(client: aiohttp.ClientSession, method: str, url: URL, headers: list, body: bytes):
        return client.request(method, url, headers=headers, data=body if body else None, allow_redirects=False)


def describe(exc: Exception) -> str:
    return str(exc) or type(exc).__name__
