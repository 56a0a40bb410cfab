"""The proxy's ASGI app (Starlette; the upstream client is httpx's AsyncClient).

POST /v1/completions, /v1/chat/completions and llama.cpp's /completion are inspected: the request's domain
chooses the pool, and the answer's ``timings`` become one aggregate record. Every other path and method goes
byte for byte to a healthy pool. Answers stream back chunk by chunk as they come (server-sent events are
scanned for ``timings`` on the way, never held back); the engine's own errors reach the client unchanged;
a pool that cannot be reached gives 502, one that does not answer in time 504, each with a JSON body naming
the pool. A client that disconnects closes the upstream request. The proxy's own routes live under
/specwatch/ (metrics, alerts, decision, pools) besides /health, so they cannot clash with the engine's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import time
from typing import Any

import httpx
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route as Path

from agent.proxy import domains
from agent.proxy.config import ProxyConfig
from agent.proxy.metrics import ProxyMetrics
from agent.proxy.pools import Pool, Pools
from agent.proxy.route import NoPool, Router
from agent.proxy.timings import Served, SSETimings, aggregate, body_timings
from agent.records import RecordError
from agent.sidecar import Sidecar

log = logging.getLogger("specwatch.proxy")
INSPECTED = frozenset(("/v1/completions", "/v1/chat/completions", "/completion", "/completions"))
HOP_BY_HOP = frozenset(("connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
                        "trailer", "trailers", "transfer-encoding", "upgrade", "host", "content-length",
                        domains.HEADER))
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"]


class Proxy:
    """The proxy's state: the sidecar it records into, its pools and router, the upstream client."""

    def __init__(self, config: ProxyConfig, sidecar: Sidecar, pools: Pools, metrics: ProxyMetrics):
        self.config, self.sidecar, self.pools, self.metrics = config, sidecar, pools, metrics
        self.router = Router(sidecar, pools)
        self._rules_read_body = any(rule.kind != "path" for rule in config.rules)
        pools.on_change = self._pools_changed
        self.client: httpx.AsyncClient | None = None
        self._checks: asyncio.Task | None = None

    def _pools_changed(self) -> None:
        self.router.refresh()
        self.metrics.set_health(self.pools.all)

    async def start(self) -> None:
        """Open the upstream client, check every pool once, then keep checking in the background."""
        c = self.config
        timeout = httpx.Timeout(c.read_seconds, connect=c.connect_seconds)
        self._timeout = {"timeout": timeout.as_dict()}
        # TCP_NODELAY: a request's headers and body go out in separate writes; Nagle would hold the body
        # back until the engine acknowledges the headers.
        transport = httpx.AsyncHTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
                                             limits=httpx.Limits(max_connections=None, max_keepalive_connections=64))
        self.client = httpx.AsyncClient(timeout=timeout, follow_redirects=False, trust_env=False, transport=transport)
        await self.pools.check_all(self.client)
        self._pools_changed()
        self._checks = asyncio.create_task(self.pools.run(self.client, c.health_seconds))

    async def stop(self) -> None:
        if self._checks is not None:
            self._checks.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._checks
        if self.client is not None:
            await self.client.aclose()

    # -- proxying ------------------------------------------------------------------------------------------
    async def handle(self, request: Request) -> Response:
        started = time.perf_counter()
        path = request.url.path
        inspected = request.method == "POST" and path in INSPECTED
        size = request.headers.get("content-length")
        if size is not None and size.isdigit() and int(size) > self.config.max_body:
            return _error(413, "request_too_large", f"body over {self.config.max_body} bytes", None)
        body = await request.body()
        try:
            if inspected:
                header = request.headers.get(domains.HEADER)
                # The body is parsed only when a rule reads it (a large prompt costs a millisecond to parse).
                parsed = _json(body) if header is None and self._rules_read_body else None
                domain = domains.resolve(header, path, parsed, self.config.rules)
                route = self.router.choose(domain)
                pool = route.pool
            else:
                domain, pool = None, self._any_pool()
        except domains.DomainError as exc:
            return _error(400, "invalid_domain", str(exc), None)
        except NoPool as exc:
            self.metrics.count("none", "no_pool")
            return _error(503, "no_upstream", str(exc), None)
        url = pool.base + path + (f"?{request.url.query}" if request.url.query else "")
        headers = [(k, v) for k, v in request.headers.raw if k.decode("latin-1").lower() not in HOP_BY_HOP]
        # A Request built directly skips the client's merging of base URL, headers and cookies (none are set).
        upstream = httpx.Request(request.method, url, headers=headers, content=body, extensions=self._timeout)
        try:
            try:
                answer = await self.client.send(upstream, stream=True)
            except httpx.RemoteProtocolError:
                # A kept-alive connection the engine closed (it restarted, or dropped it idle) fails before any
                # answer: the engine never saw the request, so send it once more on a fresh connection.
                answer = await self.client.send(upstream, stream=True)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            self.metrics.count(pool.name, "connect_error")
            return _error(502, "upstream_unreachable", f"pool {pool.name} ({pool.base}): {_text(exc)}", pool)
        except httpx.TimeoutException as exc:
            self.metrics.count(pool.name, "timeout")
            return _error(504, "upstream_timeout", f"pool {pool.name} ({pool.base}) did not answer within "
                                                   f"{self.config.read_seconds:g} s: {_text(exc)}", pool)
        except httpx.HTTPError as exc:
            self.metrics.count(pool.name, "connect_error")
            return _error(502, "upstream_failed", f"pool {pool.name} ({pool.base}): {_text(exc)}", pool)
        served = None
        if inspected:
            served = Served(domain, pool.name, pool.lookahead, pool.target_version or "unknown",
                            pool.draft_version or self.pools.draft_of(pool.target_version),
                            request.headers.get("x-request-id"), self.sidecar.pod)
        out = StreamingResponse(self._relay(answer, pool, served, started), status_code=answer.status_code)
        out.raw_headers = [(k, v) for k, v in answer.headers.raw
                           if k.decode("latin-1").lower() not in HOP_BY_HOP or k.lower() == b"content-length"]
        out.raw_headers.append((b"x-specwatch-pool", pool.name.encode()))
        return out

    async def _relay(self, answer: httpx.Response, pool: Pool, served: Served | None, started: float):
        """Yield the engine's bytes as they come; at the end, record the request's timings."""
        watch = served is not None and answer.status_code < 400 and "content-encoding" not in answer.headers
        stream = watch and answer.headers.get("content-type", "").startswith("text/event-stream")
        scanner = SSETimings() if stream else None
        copy = bytearray() if watch and not stream else None
        limit = self.config.max_record_body
        result = "cancelled"
        try:
            async for chunk in answer.aiter_raw():
                if scanner is not None:
                    scanner.feed(chunk)
                elif copy is not None:
                    if len(copy) + len(chunk) <= limit:
                        copy += chunk
                    else:
                        copy = None
                yield chunk
            result = "engine_error" if answer.status_code >= 400 else "untimed"
            if watch:
                if scanner is not None:
                    scanner.close()
                result = self._record(scanner.timings if scanner is not None else
                                      body_timings(bytes(copy)) if copy is not None else None, served)
        except httpx.TimeoutException:
            result = "timeout"
            log.warning("pool %s: no chunk within %g s; stream closed", pool.name, self.config.read_seconds)
        except httpx.HTTPError as exc:
            result = "connect_error"
            log.warning("pool %s: stream broken: %s", pool.name, _text(exc))
        finally:
            await answer.aclose()
            if served is not None:
                self.metrics.count(pool.name, result, time.perf_counter() - started)

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

    # -- the proxy's own routes ----------------------------------------------------------------------------
    async def health(self, _: Request) -> Response:
        pools = {p.name: p.healthy for p in self.pools.all}
        ok = any(pools.values())
        return JSONResponse({"status": "ok" if ok else "no healthy upstream", "pools": pools},
                            status_code=200 if ok else 503)

    async def decision(self, request: Request) -> Response:
        try:
            domain = domains.check(request.query_params.get("domain"), "domain")
        except domains.DomainError as exc:
            return _error(400, "invalid_domain", str(exc), None)
        route = self.router.latest(domain)
        if route is None:
            return JSONResponse({"domain": domain, "pool": None, "lookahead": None, "speculate": None,
                                 "policy": None, "reason": "no request of this domain yet (or no healthy pool)"})
        d = route.decision
        return JSONResponse({"domain": domain, "pool": route.pool.name, "lookahead": route.pool.lookahead,
                             "speculate": route.pool.lookahead > 0, "policy": d.policy, "reason": d.reason})

    async def pool_list(self, _: Request) -> Response:
        return JSONResponse({"pools": [p.view() for p in self.pools.all]})

    async def alerts(self, request: Request) -> Response:
        state = request.query_params.get("state", "firing")
        if state not in ("firing", "resolved", "all"):
            return _error(400, "invalid_state", "state must be firing, resolved or all", None)
        s = self.sidecar
        found = s.alerts.alerts(state) if s.alerts is not None else s.store.load_alerts(state)
        return JSONResponse({"state": state, "alerts": [
            {"labels": dict(a.labels), "annotations": dict(a.annotations), "starts_at": a.starts_at,
             "ends_at": a.ends_at, "state": a.state, "fingerprint": a.fingerprint} for a in found]})

    async def prometheus(self, _: Request) -> Response:
        return Response(generate_latest(self.metrics.registry), media_type=CONTENT_TYPE_LATEST)


def create_app(proxy: Proxy) -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(_):
        await proxy.start()
        try:
            yield
        finally:
            await proxy.stop()

    return Starlette(routes=[
        Path("/health", proxy.health, methods=["GET"]),
        Path("/specwatch/decision", proxy.decision, methods=["GET"]),
        Path("/specwatch/pools", proxy.pool_list, methods=["GET"]),
        Path("/specwatch/alerts", proxy.alerts, methods=["GET"]),
        Path("/specwatch/metrics", proxy.prometheus, methods=["GET"]),
        Path("/{path:path}", proxy.handle, methods=METHODS),
    ], lifespan=lifespan)


def _json(body: bytes) -> dict | None:
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _error(status: int, kind: str, message: str, pool: Pool | None) -> JSONResponse:
    error: dict[str, Any] = {"type": kind, "message": message, "code": status}
    if pool is not None:
        error["pool"] = pool.name
    return JSONResponse({"error": error}, status_code=status)


def _text(exc: Exception) -> str:
    return str(exc) or type(exc).__name__
