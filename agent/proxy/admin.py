"""The proxy's admin listener: specwatch's own routes, on a socket of their own (loopback by default), never on
the port inference clients use, where every path but /health belongs to the engine.

``GET /metrics`` (what Prometheus scrapes), ``/alerts?state=firing|resolved|all``, ``/decision?domain=D``,
``/pools`` and ``/sample`` (the live prompt sample). They show pools' internal URLs, model versions, alert
annotations and per-domain traffic figures, so with a token set every one needs it
(``Authorization: Bearer <token>``), as ``specwatch serve --auth all`` does; without a token, whoever reaches
the admin listener reads them (the proxy warns at start when that is beyond loopback).
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route as Path

from agent.http.auth import TokenGate
from agent.runtime.prompt_sampler import NDJSON, OFF
from agent.proxy import domains
from agent.proxy.asgi import error_body

ROUTES = ("/metrics", "/alerts", "/decision", "/pools", "/sample")


class Admin:
    """The admin routes' handlers over one proxy (agent/proxy/app.py's Proxy)."""

    def __init__(self, proxy):
        self.proxy = proxy

    async def decision(self, request: Request) -> Response:
        try:
            domain = domains.check(request.query_params.get("domain"), "domain")
        except domains.DomainError as exc:
            return JSONResponse(error_body(400, "invalid_domain", str(exc)), status_code=400)
        route = self.proxy.router.latest(domain)
        if route is None:
            return JSONResponse({"domain": domain, "pool": None, "lookahead": None, "speculate": None,
                                 "policy": None, "reason": "no request of this domain yet (or no healthy pool)"})
        d = route.decision
        return JSONResponse({"domain": domain, "pool": route.pool.name, "lookahead": route.pool.lookahead,
                             "speculate": route.pool.lookahead > 0, "policy": d.policy, "reason": d.reason})

    async def pools(self, _: Request) -> Response:
        return JSONResponse({"pools": [p.view() for p in self.proxy.pools.all]})

    async def alerts(self, request: Request) -> Response:
        state = request.query_params.get("state", "firing")
        if state not in ("firing", "resolved", "all"):
            return JSONResponse(error_body(400, "invalid_state", "state must be firing, resolved or all"),
                                status_code=400)
        s = self.proxy.sidecar
        found = s.alerts.alerts(state) if s.alerts is not None else s.store.load_alerts(state)
        return JSONResponse({"state": state, "alerts": [
            {"labels": dict(a.labels), "annotations": dict(a.annotations), "starts_at": a.starts_at,
             "ends_at": a.ends_at, "state": a.state, "fingerprint": a.fingerprint} for a in found]})

    async def metrics(self, _: Request) -> Response:
        return Response(generate_latest(self.proxy.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    async def sample(self, _: Request) -> Response:
        """The live prompt sample as JSON lines for `specwatch guard --prompts`."""
        sampler = self.proxy.sampler
        if sampler is None:
            return JSONResponse(error_body(404, "sampling_off", OFF), status_code=404)
        return Response(sampler.lines(), media_type=NDJSON)


def admin_app(proxy, token: str | None):
    """The admin listener's ASGI app: every route behind ``token`` when one is set."""
    admin = Admin(proxy)
    handlers = (admin.metrics, admin.alerts, admin.decision, admin.pools, admin.sample)
    app = Starlette(routes=[Path(path, handler, methods=["GET"]) for path, handler in zip(ROUTES, handlers)])
    return TokenGate(app, token) if token is not None else app
