"""The proxy's ASGI app, behind both of its listeners: requests to forward go through a raw ASGI handler to
aiohttp's client; /health and the admin routes (agent/proxy/admin.py) are Starlette's.

POST /v1/completions, /v1/chat/completions, llama.cpp's /completion and SGLang's /generate are inspected: the
request's domain chooses the pool, and the figures in the answer become one aggregate record, read by the
pool's engine adapter (agent/proxy/engines/). Every other path and method goes
byte for byte to a healthy pool. Answers stream back chunk by chunk as they come (agent/proxy/relay.py); the
engine's own errors reach the client unchanged; a pool that cannot be reached is taken out of rotation and
the request goes to the next-best healthy pool (agent/proxy/failover.py), 502 when none is left, and one that
does not answer in time gives 504, each with a JSON body naming the pool; an answer that breaks off midway
is cut off for the client too (its connection closes). A client that disconnects closes the upstream
request. On the inference listener the proxy answers /health only; every other path is the engine's
(/metrics and /props too). specwatch's own routes answer on the admin listener only, so a client of the
engine sees the engine. After SIGTERM the requests in flight run on for ``drain_seconds``; the log says how
many finished and how many were cut.

Per request the forwarding path builds no framework objects: with Starlette's StreamingResponse and httpx
(0.5-0.9 ms alone) the proxy took 1.6-1.9 ms of CPU per request on this machine, now 0.5-0.65 ms
(bench/proxy_overhead.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time

import aiohttp
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route as Path

from agent.runtime.prompt_sampler import live_sample
from agent.proxy import asgi, domains
from agent.proxy.admin import admin_app
from agent.proxy.config import ProxyConfig
from agent.proxy.failover import Opener, Unreachable, describe
from agent.proxy.metrics import ProxyMetrics
from agent.proxy.pools import Pool, Pools
from agent.proxy.prompts import prompt_text
from agent.proxy.relay import HOP_BY_HOP, relay
from agent.proxy.route import NoPool, Router
from agent.proxy.engines.base import Served
from agent.hub.sidecar import Sidecar

log = logging.getLogger("specwatch.proxy")
INSPECTED = frozenset(("/v1/completions", "/v1/chat/completions", "/completion", "/completions", "/generate"))
# Not passed to the engine either: the proxy read the whole body already, so it does not wait for a 100
# Continue from the engine (aiohttp would honour the client's Expect, and an engine that ignores it stalls).
NOT_SENT = HOP_BY_HOP | {b"expect"}
_DOMAIN = domains.HEADER.encode()
METHODS = frozenset(("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"))
NOT_FORWARDED = PlainTextResponse("Method Not Allowed", status_code=405,
                                  headers={"Allow": ", ".join(sorted(METHODS))})
READS = ("GET", "HEAD")
# aiohttp adds these unless told not to; the engine gets the client's own (as it would directly).
NOT_ADDED = ("Accept", "Accept-Encoding", "User-Agent", "Content-Type")
# Kept-alive upstream connections are dropped after this idle time: under llama.cpp's (and uvicorn's) 5 s, so
# the proxy does not reuse a connection the engine is closing.
IDLE_SECONDS = 4.0


class Proxy:
    """The proxy's state: the sidecar it records into, its pools and router, the upstream client."""

    def __init__(self, config: ProxyConfig, sidecar: Sidecar, pools: Pools, metrics: ProxyMetrics):
        self.config, self.sidecar, self.pools, self.metrics = config, sidecar, pools, metrics
        self.router = Router(sidecar, pools, config.default_pool, config.shared_load)
        self._rules_read_body = any(rule.kind != "path" for rule in config.rules)
        self.sampler = live_sample(config.sidecar.sample_prompts, config.sidecar.token,
                                   "/sample of the admin listener")
        pools.on_change = self._pools_changed
        # pool-level records (engines/pool_level.py) reach the sidecar as the relay's do
        pools.on_record, pools.pod = lambda found: self.sidecar.record(found), sidecar.pod
        self.client: aiohttp.ClientSession | None = None
        self.opener: Opener | None = None
        self._checks: asyncio.Task | None = None
        self.inflight = self.cut = 0  # requests being forwarded; cut by the end of the drain
        self._drain: tuple[float, int] | None = None  # (monotonic start, requests in flight then)

    def _pools_changed(self) -> None:
        self.router.refresh()
        self.metrics.set_health(self.pools.all)

    async def start(self) -> None:
        """Open the upstream client, check every pool once, then keep checking in the background."""
        c = self.config
        # sock_read: the longest wait for the answer's head or for its next chunk (httpx's read timeout).
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=c.connect_seconds, sock_read=c.read_seconds)
        # aiohttp sets TCP_NODELAY on its connections (a request's head and body go out in separate writes;
        # Nagle would hold the body back until the engine acknowledges the head).
        options = dict(timeout=timeout, auto_decompress=False, skip_auto_headers=NOT_ADDED,
                       cookie_jar=aiohttp.DummyCookieJar(), trust_env=False)
        self.client = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=IDLE_SECONDS), **options)
        fresh = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, force_close=True), **options)
        self.opener = Opener(self.client, fresh, self.pools, lambda p: self.metrics.failovers.labels(p.name).inc())
        await self.pools.check_all(self.client)
        self._pools_changed()
        self._checks = asyncio.create_task(self.pools.run(self.client, c.health_seconds))

    async def stop(self) -> None:
        """After the drain (uvicorn cancelled what still ran): say how it went, close the upstream clients."""
        if self._drain is not None:
            for _ in range(100):  # the cancelled requests unwind
                if not self.inflight:
                    break
                await asyncio.sleep(0.01)
            since, then = self._drain
            took, left = time.monotonic() - since, self.cut + self.inflight
            if left:
                log.error("drain: %d request(s) in flight at the signal; %d cut after drain_seconds=%g (their "
                          "answers broke off, nothing recorded of them), the rest finished", then, left,
                          self.config.drain_seconds)
            else:
                log.info("drain: %d request(s) in flight at the signal, every one finished (%.1f s)", then, took)
        if self._checks is not None:
            self._checks.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._checks
        await self.pools.stop()
        if self.opener is not None:
            await self.opener.fresh.close()
        if self.client is not None:
            await self.client.close()

    def drain_started(self) -> None:
        """SIGTERM: the requests in flight now may finish within ``drain_seconds``."""
        self._drain = (time.monotonic(), self.inflight)
        log.info("draining: %d request(s) in flight get up to %g s to finish", self.inflight,
                 self.config.drain_seconds)

    # -- forwarding ----------------------------------------------------------------------------------------
    async def forward(self, scope: dict, receive: asgi.Receive, send: asgi.Send) -> None:
        self.inflight += 1
        try:
            await self._forward(scope, receive, send)
        except asyncio.CancelledError:
            if self._drain is not None:  # uvicorn's drain ran out: this request is cut
                self.cut += 1
            raise
        finally:
            self.inflight -= 1

    async def _forward(self, scope: dict, receive: asgi.Receive, send: asgi.Send) -> None:
        started = time.perf_counter()
        method, path, headers = scope["method"], scope["path"], scope["headers"]
        inspected = method == "POST" and path in INSPECTED
        limit = self.config.max_body
        size = asgi.header(headers, b"content-length")
        try:
            body = None if size is not None and size.isdigit() and int(size) > limit else \
                await asgi.read_body(receive, limit)
        except asgi.ClientGone:
            return
        if body is None:
            return await asgi.send_json(send, 413, asgi.error_body(413, "request_too_large",
                                                                   f"body over {limit} bytes"))
        lookahead = None
        try:
            if inspected:
                header = domains.from_header(asgi.raw_header(headers, _DOMAIN))
                # The body is parsed only when a rule reads it (a large prompt costs a millisecond to parse).
                parsed = _json(body) if header is None and self._rules_read_body else None
                domain = domains.resolve(header, path, parsed, self.config.rules)
                route = self.router.choose(domain)
                pool, lookahead = route.pool, route.decision.lookahead
                if self.sampler is not None:  # the body is parsed only if the sample keeps this request
                    self.sampler.offer(domain, lambda: prompt_text(path, parsed if parsed is not None else _json(body)))
            else:
                domain, pool = None, self._any_pool()
        except domains.DomainError as exc:
            return await asgi.send_json(send, 400, asgi.error_body(400, "invalid_domain", str(exc)))
        except NoPool as exc:
            self.metrics.count("none", "no_pool")
            return await asgi.send_json(send, 503, asgi.error_body(503, "no_upstream", str(exc)))
        # The path as the client sent it (not percent-decoded and encoded again).
        target = (scope.get("raw_path") or path.encode()).decode("latin-1")
        query = scope.get("query_string")
        target += "?" + query.decode("latin-1") if query else ""
        # aiohttp writes header values as UTF-8: a value that is not UTF-8 (obsolete in HTTP) would reach the
        # engine with U+FFFD in place of its stray bytes.
        out = [(k.decode("latin-1"), v.decode("utf-8", "replace")) for k, v in headers if k not in NOT_SENT]
        watch = asgi.Disconnect(receive)
        result, served = "cancelled", None
        # The load an inspected request meets: the requests in flight on its pool (every pool's where they share
        # a machine) over its life, it included (agent/proxy/inflight.py).
        sent = pool if inspected else None
        if sent is not None:
            met = self.pools.enter(sent)
        try:
            try:
                answer, pool = await self.opener.open(method, target, out, body, pool,
                                                      lambda tried: self.router.next_pool(lookahead, tried))
            except Exception as exc:  # noqa: BLE001 - each kind answered below; the client gets a JSON error
                result = None
                return await self._failed(send, exc, pool, watch)
            if inspected:
                if pool is not sent:  # it failed over: it runs on the next pool
                    self.pools.leave(sent, met, ended=False)
                    sent, met = pool, self.pools.enter(pool)
                mine = met[1] if self.config.shared_load else met[0]
                served = Served(domain, pool.name, pool.lookahead, pool.target_version or "unknown",
                                pool.draft_version or self.pools.draft_of(pool.target_version),
                                asgi.header(headers, b"x-request-id"), self.sidecar.pod, mine.sent, mine)
            try:
                result = await relay(send, answer, pool, served, watch, self, started)
            finally:
                answer.close()  # back to the pool when read to its end, else closed (the engine stops generating)
        except asyncio.CancelledError:
            if not watch.gone:
                result = "cut" if self._drain is not None else result
                raise
            watch.absorb()
        finally:
            if sent is not None:
                self.pools.leave(sent, met)
            watch.finish()
            if served is not None and result is not None:
                self.metrics.count(pool.name, result, time.perf_counter() - started)

    async def _failed(self, send: asgi.Send, exc: Exception, pool: Pool, watch: asgi.Disconnect) -> None:
        """The answer when no engine answered: 502 (no pool could be reached, or the request failed), 504 (the
        engine took longer than ``read_seconds`` to start its answer)."""
        watch.finish()
        if isinstance(exc, Unreachable):
            self.metrics.count(exc.pool.name, "connect_error")
            return await asgi.send_json(send, 502, asgi.error_body(502, "upstream_unreachable", str(exc),
                                                                   exc.pool.name))
        if isinstance(exc, asyncio.TimeoutError):  # aiohttp's ServerTimeoutError is one
            self.metrics.count(pool.name, "timeout")
            return await asgi.send_json(send, 504, asgi.error_body(504, "upstream_timeout", f"pool {pool.name} "
                                        f"({pool.base}) did not answer within {self.config.read_seconds:g} s: "
                                        f"{describe(exc)}", pool.name))
        if isinstance(exc, aiohttp.ClientError):
            self.metrics.count(pool.name, "connect_error")
            return await asgi.send_json(send, 502, asgi.error_body(502, "upstream_failed",
                                                                   f"pool {pool.name} ({pool.base}): {describe(exc)}",
                                                                   pool.name))
        raise exc

    def _any_pool(self) -> Pool:
        healthy = self.pools.healthy()
        if not healthy:
            raise NoPool("no upstream pool is healthy")
        return healthy[0]

    # -- the inference listener's own route --------------------------------------------------------------------
    async def health(self, _: Request) -> Response:
        pools = {p.name: p.healthy for p in self.pools.all}
        ok = any(pools.values())
        return JSONResponse({"status": "ok" if ok else "no healthy upstream", "pools": pools},
                            status_code=200 if ok else 503)


class App:
    """The ASGI app of both listeners (one uvicorn server, two sockets; the socket a request came in on tells
    which). Admin listener: specwatch's routes (agent/proxy/admin.py). Inference listener: GET /health is the
    proxy's, every other path goes straight to ``Proxy.forward``, other methods get 405. The lifespan (the
    proxy's start and stop) is Starlette's."""

    def __init__(self, proxy: Proxy, token: str | None):
        @contextlib.asynccontextmanager
        async def lifespan(_):
            await proxy.start()
            try:
                yield
            finally:
                await proxy.stop()

        self.proxy = proxy
        self.own = Starlette(routes=[Path("/health", proxy.health, methods=["GET"])], lifespan=lifespan)
        self.admin = admin_app(proxy, token)
        # The admin listener's bound port (agent/proxy/listeners.py); None: no admin listener, nothing answers
        # the admin routes. The port is the socket's own (uvicorn's scope["server"]), never a client's header.
        self.admin_port: int | None = None

    async def __call__(self, scope: dict, receive: asgi.Receive, send: asgi.Send) -> None:
        if scope["type"] != "http":
            await self.own(scope, receive, send)
        elif (server := scope.get("server")) is not None and server[1] == self.admin_port:
            await self.admin(scope, receive, send)
        elif scope["path"] == "/health" and scope["method"] in READS:
            await self.own(scope, receive, send)
        elif scope["method"] in METHODS:
            await self.proxy.forward(scope, receive, send)
        else:
            await NOT_FORWARDED(scope, receive, send)


def create_app(proxy: Proxy, token: str | None) -> App:
    return App(proxy, token)


def _json(body: bytes) -> dict | None:
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None

