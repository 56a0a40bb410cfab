"""The proxy's ASGI app, behind both of its listeners: requests to forward go through a raw ASGI handler to
aiohttp's client; /health and the admin routes (agent/proxy/admin.py) are Starlette's.

POST /v1/completions, /v1/chat/completions and llama.cpp's /completion are inspected: the request's domain
chooses the pool, and the answer's ``timings`` become one aggregate record. Every other path and method goes
byte for byte to a healthy pool. Answers stream back chunk by chunk as they come (server-sent events are
scanned for ``timings`` on the way, never held back); the engine's own errors reach the client unchanged;
a pool that cannot be reached gives 502, one that does not answer in time 504, each with a JSON body naming
the pool; an answer that breaks off midway is cut off for the client too (its connection closes). A client
that disconnects closes the upstream request. On the inference listener the proxy answers /health only; every
other path is the engine's (/metrics and /props too). specwatch's own routes answer on the admin listener only,
so a client of the engine sees the engine.

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
from yarl import URL

from agent.prompt_sampler import live_sample
from agent.proxy import asgi, domains
from agent.proxy.admin import admin_app
from agent.proxy.config import ProxyConfig
from agent.proxy.metrics import ProxyMetrics
from agent.proxy.pools import Pool, Pools
from agent.proxy.prompts import prompt_text
from agent.proxy.route import NoPool, Router
from agent.proxy.timings import Served, SSETimings, aggregate, body_timings
from agent.sidecar import Sidecar
from records import RecordError

log = logging.getLogger("specwatch.proxy")
INSPECTED = frozenset(("/v1/completions", "/v1/chat/completions", "/completion", "/completions"))
HOP_BY_HOP = frozenset((b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te",
                        b"trailer", b"trailers", b"transfer-encoding", b"upgrade", b"host", b"content-length",
                        domains.HEADER.encode()))
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
        self.router = Router(sidecar, pools, config.default_pool)
        self._rules_read_body = any(rule.kind != "path" for rule in config.rules)
        self.sampler = live_sample(config.sidecar.sample_prompts, config.sidecar.token,
                                   "/sample of the admin listener")
        pools.on_change = self._pools_changed
        self.client: aiohttp.ClientSession | None = None
        self._checks: asyncio.Task | None = None

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
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=IDLE_SECONDS)
        self.client = aiohttp.ClientSession(connector=connector, timeout=timeout, auto_decompress=False,
                                            skip_auto_headers=NOT_ADDED, cookie_jar=aiohttp.DummyCookieJar(),
                                            trust_env=False)
        await self.pools.check_all(self.client)
        self._pools_changed()
        self._checks = asyncio.create_task(self.pools.run(self.client, c.health_seconds))

    async def stop(self) -> None:
        if self._checks is not None:
            self._checks.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._checks
        if self.client is not None:
            await self.client.close()

    # -- forwarding ----------------------------------------------------------------------------------------
    async def forward(self, scope: dict, receive: asgi.Receive, send: asgi.Send) -> None:
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
        try:
            if inspected:
                header = asgi.header(headers, _DOMAIN)
                # The body is parsed only when a rule reads it (a large prompt costs a millisecond to parse).
                parsed = _json(body) if header is None and self._rules_read_body else None
                domain = domains.resolve(header, path, parsed, self.config.rules)
                pool = self.router.choose(domain).pool
                if self.sampler is not None:  # the body is parsed only if the sample keeps this request
                    self.sampler.offer(domain, lambda: prompt_text(path, parsed if parsed is not None else _json(body)))
            else:
                domain, pool = None, self._any_pool()
        except domains.DomainError as exc:
            return await asgi.send_json(send, 400, asgi.error_body(400, "invalid_domain", str(exc)))
        except NoPool as exc:
            self.metrics.count("none", "no_pool")
            return await asgi.send_json(send, 503, asgi.error_body(503, "no_upstream", str(exc)))
        served = None
        if inspected:
            served = Served(domain, pool.name, pool.lookahead, pool.target_version or "unknown",
                            pool.draft_version or self.pools.draft_of(pool.target_version),
                            asgi.header(headers, b"x-request-id"), self.sidecar.pod)
        # The path as the client sent it (not percent-decoded and encoded again).
        target = (scope.get("raw_path") or path.encode()).decode("latin-1")
        query = scope.get("query_string")
        url = URL(pool.base + target + ("?" + query.decode("latin-1") if query else ""), encoded=True)
        # aiohttp writes header values as UTF-8: a value that is not UTF-8 (obsolete in HTTP) would reach the
        # engine with U+FFFD in place of its stray bytes.
        out = [(k.decode("latin-1"), v.decode("utf-8", "replace")) for k, v in headers if k not in NOT_SENT]
        watch = asgi.Disconnect(receive)
        result = "cancelled"
        try:
            result = await self._exchange(send, method, url, out, body, pool, served, watch)
        except asyncio.CancelledError:
            if not watch.gone:
                raise
            watch.absorb()
        finally:
            watch.finish()
            if served is not None and result is not None:
                self.metrics.count(pool.name, result, time.perf_counter() - started)

    async def _exchange(self, send: asgi.Send, method: str, url: URL, headers: list, body: bytes, pool: Pool,
                        served: Served | None, watch: asgi.Disconnect) -> str | None:
        """Send the request to ``pool`` and relay its answer; the result to count (None: counted already)."""
        try:
            try:
                answer = await self._open(method, url, headers, body)
            except aiohttp.ServerDisconnectedError:
                # A kept-alive connection the engine closed (it restarted, or dropped it idle) fails before any
                # answer: the engine never saw the request, so send it once more on a fresh connection.
                answer = await self._open(method, url, headers, body)
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
            self.metrics.count(pool.name, "connect_error")
            watch.finish()
            await asgi.send_json(send, 502, asgi.error_body(502, "upstream_unreachable",
                                                   f"pool {pool.name} ({pool.base}): {_text(exc)}", pool.name))
            return None
        except asyncio.TimeoutError as exc:  # aiohttp's ServerTimeoutError is one
            self.metrics.count(pool.name, "timeout")
            watch.finish()
            await asgi.send_json(send, 504, asgi.error_body(504, "upstream_timeout", f"pool {pool.name} ({pool.base}) "
                                                   f"did not answer within {self.config.read_seconds:g} s: "
                                                   f"{_text(exc)}", pool.name))
            return None
        except aiohttp.ClientError as exc:
            self.metrics.count(pool.name, "connect_error")
            watch.finish()
            await asgi.send_json(send, 502, asgi.error_body(502, "upstream_failed",
                                                   f"pool {pool.name} ({pool.base}): {_text(exc)}", pool.name))
            return None
        try:
            return await self._relay(send, answer, pool, served, watch)
        finally:
            answer.close()  # back to the pool when read to its end, else closed (the engine stops generating)

    def _open(self, method: str, url: URL, headers: list, body: bytes):
        return self.client.request(method, url, headers=headers, data=body if body else None,
                                   allow_redirects=False)

    async def _relay(self, send: asgi.Send, answer: aiohttp.ClientResponse, pool: Pool, served: Served | None,
                     watch: asgi.Disconnect) -> str:
        """Relay the engine's answer as it comes; at the end, record the request's timings."""
        status = answer.status
        head = [(k, v) for k, v in answer.raw_headers if k.lower() not in HOP_BY_HOP or k.lower() == b"content-length"]
        head.append((b"x-specwatch-pool", pool.name.encode()))
        kind = answer.headers.get("content-type", "")
        watched = served is not None and status < 400 and "content-encoding" not in answer.headers
        scanner = SSETimings() if watched and kind.startswith("text/event-stream") else None
        copy = bytearray() if watched and scanner is None else None
        limit = self.config.max_record_body
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
            log.warning("pool %s: no chunk within %g s; answer cut off", pool.name, self.config.read_seconds)
            return "timeout"  # the response stays incomplete: uvicorn closes the client's connection
        except aiohttp.ClientError as exc:
            log.warning("pool %s: answer broken off: %s", pool.name, _text(exc))
            return "connect_error"
        watch.finish()
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        if status >= 400:
            return "engine_error"
        if not watched:
            return "untimed"
        if scanner is not None:
            scanner.close()
            return self._record(scanner.timings, served)
        return self._record(body_timings(bytes(copy)) if copy is not None else None, served)

    def _record(self, timings: dict | None, served: Served) -> str:
        try:
            record = aggregate(timings, served, time.time())
        except RecordError as exc:
            log.warning("pool %s: engine timings refused: %s", served.pool, exc)
            return "refused"
        if record is None:
            return "untimed"
        self.sidecar.record(record)
        return "recorded"

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


def _text(exc: Exception) -> str:
    return str(exc) or type(exc).__name__
