"""The sidecar's HTTP API (FastAPI): the two data-path entry points plus alerts, metrics and probes.

POST routes need ``Authorization: Bearer <token>`` when a token is configured (401 otherwise). Bodies over
``body_limit`` bytes get 413. Any invalid input gets 422 with a one-line ``message`` naming the field (and
the record's index in a batch) and nothing from that request is kept. OpenAPI: /openapi.json, /docs.
"""

from __future__ import annotations

import secrets
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, GCCollector, PlatformCollector, \
    ProcessCollector, generate_latest

from agent.api_models import AlertOut, AlertsOut, DecisionOut, GenerateIn, GenerateOut, Problem, StepsAccepted, \
    StepsIn
from agent.generator import Generator, ModelsUnavailable
from agent.records import RecordError
from agent.sidecar import Sidecar
from storage import StoreError

DEFAULT_BODY_LIMIT = 4 * 1024 * 1024
ERRORS = {401: {"model": Problem}, 413: {"model": Problem}, 422: {"model": Problem}, 503: {"model": Problem}}


def create_app(sidecar: Sidecar, *, token: str | None = None, body_limit: int = DEFAULT_BODY_LIMIT,
               generator: Generator | None = None, models_configured: bool = False, max_new_tokens: int = 1024,
               registry: CollectorRegistry | None = None, ring: Any = None) -> FastAPI:
    """The app over ``sidecar``. ``registry``: what /metrics exports (default: the wired Metrics' registry,
    else one of the process's own collectors)."""
    app = FastAPI(title="specwatch sidecar", version="1", max_body_size=body_limit,
                  description="Records speculative decoding steps and decides the lookahead per domain.")
    registry = registry or getattr(sidecar.metrics, "registry", None) or _process_registry()
    bearer = HTTPBearer(auto_error=False, description="Required on POST routes when a token is configured.")

    def authorize(credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
        if token is None:
            return
        given = credentials.credentials if credentials is not None else ""
        if not secrets.compare_digest(given.encode(), token.encode()):
            raise _Unauthorized()

    _handlers(app)

    @app.post("/v1/steps", status_code=202, response_model=StepsAccepted, dependencies=[Depends(authorize)],
              responses=ERRORS, summary="Record speculative steps")
    def post_steps(body: StepsIn) -> StepsAccepted:
        """Validate the whole batch, then count every record. Any invalid record: 422 naming its index and
        field, and nothing from the request is kept."""
        return StepsAccepted(accepted=sidecar.record_many([r.to_record() for r in body.records]))

    @app.get("/v1/decision", response_model=DecisionOut, responses=ERRORS, summary="Lookahead for a domain")
    def get_decision(domain: Annotated[str, Query(min_length=1, max_length=64)]) -> DecisionOut:
        """K for the next step of ``domain``; ``speculate`` is false exactly when K is 0."""
        if not domain.isprintable():
            raise _Invalid("domain", "must be printable text", ("query", "domain"))
        d = sidecar.decide(domain)
        return DecisionOut(domain=domain, lookahead=d.lookahead, speculate=d.speculate, policy=d.policy,
                           reason=d.reason)

    @app.post("/v1/generate", response_model=GenerateOut, dependencies=[Depends(authorize)], responses=ERRORS,
              summary="Generate with the in-process speculative decoder")
    def post_generate(body: GenerateIn) -> GenerateOut:
        """Decode ``prompt`` with the configured target and draft, the sidecar choosing K before every step
        and recording every step. 503 when no models are configured or they are still loading."""
        if body.max_tokens > max_new_tokens:
            raise _Invalid("max_tokens", f"must be at most {max_new_tokens}", ("body", "max_tokens"))
        if generator is None:
            raise ModelsUnavailable("no models configured (set kit, or target_dir and draft_dir)")
        try:
            out = generator.generate(body.prompt, body.domain, body.max_tokens, temperature=body.temperature,
                                     top_k=body.top_k, top_p=body.top_p, seed=body.seed,
                                     request_id=body.request_id)
        except ValueError as exc:
            if isinstance(exc, RecordError):
                raise
            field, _, message = str(exc).partition(": ")
            field = {"max_new_tokens": "max_tokens", "input_ids": "prompt"}.get(field, field)
            raise _Invalid(field, message or str(exc), ("body", field)) from None
        return GenerateOut(**out)

    @app.get("/v1/alerts", response_model=AlertsOut, responses=ERRORS, summary="Alerts")
    def get_alerts(state: Literal["firing", "resolved", "all"] = "firing") -> AlertsOut:
        """Alerts of this sidecar (from the alert manager when wired, else as stored)."""
        source = sidecar.alerts.alerts(state) if sidecar.alerts is not None else sidecar.store.load_alerts(state)
        return AlertsOut(state=state, alerts=[AlertOut(
            labels=dict(a.labels), annotations=dict(a.annotations), starts_at=a.starts_at, ends_at=a.ends_at,
            state=a.state, fingerprint=a.fingerprint) for a in source])

    @app.get("/metrics", response_class=Response, summary="Prometheus metrics")
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/healthz", summary="Liveness")
    async def healthz() -> dict:
        return {"status": "ok"}

    @app.get("/readyz", responses={503: {"model": Problem}}, summary="Readiness")
    def readyz() -> JSONResponse:
        """Ready when the database takes a write, the ingest worker keeps up, the step ring's reader runs
        (when configured) and the configured models are loaded."""
        checks = {"database": _database_check(sidecar), "ingest": _ingest_check(sidecar),
                  "ring": "not configured" if ring is None else "ok" if ring.alive else "reader stopped",
                  "models": _models_check(generator) if models_configured else "not configured"}
        ok = all(v in ("ok", "not configured") for v in checks.values())
        return JSONResponse({"status": "ready" if ok else "not ready", "checks": checks},
                            status_code=200 if ok else 503)

    return app


def _database_check(sidecar: Sidecar) -> str:
    if sidecar.flush_error:
        return f"last flush failed: {sidecar.flush_error}"
    try:
        with sidecar.store.db.write():  # takes the write lock (SQLite) / a connection (PostgreSQL)
            pass
    except StoreError as exc:
        return str(exc)
    return "ok"


def _ingest_check(sidecar: Sidecar) -> str:
    ingest = sidecar.ingest
    if ingest is None:
        return "not configured"
    if not ingest.alive:
        return "worker stopped"
    if ingest.pending >= ingest.max_pending:
        return f"backlogged: {ingest.pending} records or batches waiting"
    return "ok"


def _models_check(generator: Generator | None) -> str:
    if generator is not None and generator.ready:
        return "ok"
    if generator is not None and generator.error:
        return generator.error
    return "loading"


def _process_registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    for collector in (ProcessCollector, PlatformCollector, GCCollector):
        collector(registry=registry)
    return registry


class _Unauthorized(Exception):
    pass


class _Invalid(Exception):
    def __init__(self, field: str, message: str, loc: tuple):
        self.field, self.message, self.loc = field, message, loc


def _problem(status: int, message: str, detail=None, headers=None) -> JSONResponse:
    return JSONResponse({"message": message, "detail": detail}, status_code=status, headers=headers)


def _handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"loc": list(e["loc"]), "msg": _msg(e), "type": e["type"]} for e in exc.errors()]
        return _problem(422, "; ".join(_where(e["loc"]) + e["msg"] for e in errors[:3]), errors)

    @app.exception_handler(RecordError)
    async def invalid_record(_: Request, exc: RecordError) -> JSONResponse:
        loc = ["body", "records", exc.index, exc.field] if exc.index is not None else ["body", exc.field]
        return _problem(422, str(exc), [{"loc": loc, "msg": exc.message, "type": "record_error"}])

    @app.exception_handler(_Invalid)
    async def invalid_field(_: Request, exc: _Invalid) -> JSONResponse:
        return _problem(422, f"{exc.field}: {exc.message}",
                        [{"loc": list(exc.loc), "msg": exc.message, "type": "value_error"}])

    @app.exception_handler(_Unauthorized)
    async def unauthorized(_: Request, __: _Unauthorized) -> JSONResponse:
        return _problem(401, "missing or wrong bearer token (Authorization: Bearer <token>)",
                        headers={"WWW-Authenticate": "Bearer"})

    @app.exception_handler(ModelsUnavailable)
    async def no_models(_: Request, exc: ModelsUnavailable) -> JSONResponse:
        return _problem(503, str(exc))

    @app.exception_handler(StoreError)
    async def store_error(_: Request, exc: StoreError) -> JSONResponse:
        return _problem(503, str(exc))


def _msg(error: dict) -> str:
    # The wording of StepRecord.from_dict, so a client sees one vocabulary whichever check caught it.
    if error["type"] == "json_invalid":
        return f"invalid JSON at character {error['loc'][-1]}: {error.get('ctx', {}).get('error', '')}"
    return {"extra_forbidden": "unknown field", "missing": "required field is missing"}.get(error["type"],
                                                                                         error["msg"])


def _where(loc) -> str:
    """'record 3: lookahead: ' for ("body", "records", 3, "lookahead"); 'domain: ' for ("query", "domain")."""
    parts = list(loc)
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    head = ""
    if len(parts) >= 2 and parts[0] == "records" and isinstance(parts[1], int):
        head, parts = f"record {parts[1]}: ", parts[2:]
    if not parts or isinstance(parts[0], int):  # the body itself (or a JSON syntax error's offset)
        return head or "body: "
    return head + str(parts[0]) + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts[1:]) + ": "
