"""The sidecar's HTTP API (FastAPI): the two data-path entry points plus alerts, metrics and probes.

POST routes need ``Authorization: Bearer <token>`` when a token is configured (401 otherwise); with
``auth="all"`` every route but /healthz and /readyz does (agent/http/auth.py). Bodies over ``body_limit`` bytes
get 413. Any invalid input gets 422 with a one-line ``message`` naming the field (and the record's index in
a batch), duplicate JSON keys and non-finite numbers included (agent/http/strict_json.py), and nothing from that
request is kept. POST /v1/steps honours ``Idempotency-Key`` (agent/http/idempotency.py) and never waits: when
the store cannot take more it answers 503 with Retry-After (agent/http/limits.py). POST /v1/generate runs on
threads of its own, a bounded number at once (429 with Retry-After beyond). /readyz answers from a cached
probe (agent/http/readiness.py). Ingest and probes run on the event loop, never on the shared threadpool, so a
saturated threadpool cannot stall them. OpenAPI: /openapi.json, /docs.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Header, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, GCCollector, PlatformCollector, \
    ProcessCollector, generate_latest

from agent.http import idempotency
from agent.http.api_models import AlertOut, AlertsOut, DecisionOut, GenerateIn, GenerateOut, Problem, StepsAccepted, \
    StepsIn
from agent.http.auth import MESSAGE, TokenGate, bearer_of, token_ok
from agent.http.limits import Busy, GenerateGate, IngestGate, Refusals
from agent.http.readiness import Readiness
from agent.http.strict_json import BadJSON, StrictJSONRoute
from agent.hub.sidecar import Sidecar
from agent.runtime.generator import Generator, ModelsUnavailable
from agent.runtime.options import Limits
from agent.runtime.prompt_sampler import NDJSON, OFF, PromptSampler
from specwatch_core.records import RecordError
from storage import StoreError

DEFAULT_BODY_LIMIT = 4 * 1024 * 1024
ERRORS = {401: {"model": Problem}, 413: {"model": Problem}, 422: {"model": Problem}, 503: {"model": Problem}}
BUSY = {429: {"model": Problem}, 503: {"model": Problem}}


def create_app(sidecar: Sidecar, *, token: str | None = None, body_limit: int = DEFAULT_BODY_LIMIT,
               generator: Generator | None = None, models_configured: bool = False, max_new_tokens: int = 1024,
               registry: CollectorRegistry | None = None, ring: Any = None, auth: str = "ingest",
               limits: Limits | None = None, readiness: Readiness | None = None,
               sampler: PromptSampler | None = None) -> FastAPI:
    """The app over ``sidecar``. ``registry``: what /metrics exports (default: the wired Metrics' registry,
    else one of the process's own collectors). ``sampler``: keeps a sample of POST /v1/generate's prompts
    for GET /v1/sample (None: sampling off)."""
    if auth not in ("ingest", "all") or (auth == "all" and token is None):
        raise ValueError(f"auth: must be ingest, or all with a token; got {auth!r}")
    app = FastAPI(title="specwatch sidecar", version="1", max_body_size=body_limit,
                  description="Records speculative decoding steps and decides the lookahead per domain.")
    app.router.route_class = StrictJSONRoute
    if auth == "all":
        app.add_middleware(TokenGate, token=token)
    limits = limits or Limits()
    registry = registry or getattr(sidecar.metrics, "registry", None) or _process_registry()
    refusals = Refusals(registry)
    ingest, generate = IngestGate(sidecar, limits, refusals), GenerateGate(limits, refusals)
    answers = idempotency.IdempotencyCache(limits.idempotency_entries)
    readiness = readiness or Readiness(sidecar, ring=ring, generator=generator, models_configured=models_configured)
    bearer = HTTPBearer(auto_error=False, description="Required on POST routes when a token is configured.")

    async def authorize(credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
        # async: a sync dependency would run on the shared threadpool, which generate or a slow route may fill
        if token is not None and not token_ok(
                f"Bearer {credentials.credentials}" if credentials is not None else None, token):
            raise _Unauthorized()

    _handlers(app)

    @app.post("/v1/steps", status_code=202, response_model=StepsAccepted, dependencies=[Depends(authorize)],
              responses={**ERRORS, **BUSY}, summary="Record speculative steps")
    async def post_steps(body: StepsIn, request: Request, idempotency_key: Annotated[str | None, Header(
            alias=idempotency.HEADER, description="Retry with the same key: answered once, stored once "
                                                  "(10 minutes; printable, 1..128 characters).")] = None):
        """Validate the whole batch, then count every record. Any invalid record: 422 naming its index and
        field, and nothing from the request is kept. 503 + Retry-After when the store cannot take more."""
        async def handle() -> dict:
            return {"accepted": ingest.record([r.to_record() for r in body.records])}

        if idempotency_key is None:
            return JSONResponse(await handle(), status_code=202)
        try:
            key = idempotency.check_key(idempotency_key)
            scope = idempotency.scope_of(bearer_of(request.headers.get("authorization")) if token else None)
            answer, replayed = await answers.run(scope, key, await request.body(), handle)
        except (idempotency.InvalidKey, idempotency.KeyReused) as exc:
            raise _Invalid(idempotency.HEADER, str(exc), ("header", idempotency.HEADER)) from None
        return JSONResponse(answer, status_code=202, headers={idempotency.REPLAYED: "true"} if replayed else None)

    @app.get("/v1/decision", response_model=DecisionOut, responses=ERRORS, summary="Lookahead for a domain")
    def get_decision(domain: Annotated[str, Query(min_length=1, max_length=64)]) -> DecisionOut:
        """K for the next step of ``domain``; ``speculate`` is false exactly when K is 0."""
        if not domain.isprintable():
            raise _Invalid("domain", "must be printable text", ("query", "domain"))
        d = sidecar.decide(domain)
        return DecisionOut(domain=domain, lookahead=d.lookahead, speculate=d.speculate, policy=d.policy,
                           reason=d.reason)

    @app.post("/v1/generate", response_model=GenerateOut, dependencies=[Depends(authorize)],
              responses={**ERRORS, **BUSY}, summary="Generate with the in-process speculative decoder")
    async def post_generate(body: GenerateIn) -> GenerateOut:
        """Decode ``prompt`` with the configured target and draft, the sidecar choosing K before every step
        and recording every step. 503 when no models are configured or they are still loading; 429 with
        Retry-After when ``generate_concurrency`` decode and ``generate_queue`` more wait already."""
        if body.max_tokens > max_new_tokens:
            raise _Invalid("max_tokens", f"must be at most {max_new_tokens}", ("body", "max_tokens"))
        if generator is None:
            raise ModelsUnavailable("no models configured (set kit, or target_dir and draft_dir)")
        if sampler is not None:
            sampler.offer(body.domain, body.prompt)
        try:
            out = await generate.run(lambda: generator.generate(
                body.prompt, body.domain, body.max_tokens, temperature=body.temperature, top_k=body.top_k,
                top_p=body.top_p, seed=body.seed, request_id=body.request_id))
        except ValueError as exc:
            if isinstance(exc, RecordError):
                raise
            field, _, message = str(exc).partition(": ")
            field = {"max_new_tokens": "max_tokens", "input_ids": "prompt"}.get(field, field)
            raise _Invalid(field, message or str(exc), ("body", field)) from None
        return GenerateOut(**out)

    @app.get("/v1/sample", dependencies=[Depends(authorize)], response_class=PlainTextResponse,
             responses={**ERRORS, 200: {"content": {NDJSON: {}}}}, summary="The live prompt sample")
    def get_sample() -> PlainTextResponse:
        """The prompts kept per domain (``sample_prompts``) as JSON lines, the file `specwatch guard --prompts`
        reads. Needs the token when one is configured (the sample holds users' prompts); 404 when sampling is
        off."""
        if sampler is None:
            raise _NotFound(OFF)
        return PlainTextResponse(sampler.lines(), media_type=NDJSON)

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
    async def readyz() -> JSONResponse:
        """Ready when the database takes a write, the ingest worker keeps up, the step ring's reader runs
        (when configured) and the configured models are loaded. Answers within 2 s whatever the database
        does: a database that has not answered for 1.5 s is reported as stale (not ready)."""
        ok, checks = await readiness.report()
        return JSONResponse({"status": "ready" if ok else "not ready", "checks": checks},
                            status_code=200 if ok else 503)

    return app


def _process_registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    for collector in (ProcessCollector, PlatformCollector, GCCollector):
        collector(registry=registry)
    return registry


class _Unauthorized(Exception):
    pass


class _NotFound(Exception):
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
        return _problem(401, MESSAGE, headers={"WWW-Authenticate": "Bearer"})

    @app.exception_handler(_NotFound)
    async def not_found(_: Request, exc: _NotFound) -> JSONResponse:
        return _problem(404, str(exc))

    @app.exception_handler(BadJSON)
    async def bad_json(_: Request, exc: BadJSON) -> JSONResponse:
        return _problem(422, _where(exc.loc) + exc.message,
                        [{"loc": list(exc.loc), "msg": exc.message, "type": "json_invalid"}])

    @app.exception_handler(Busy)
    async def busy(_: Request, exc: Busy) -> JSONResponse:
        return _problem(exc.status, str(exc), headers={"Retry-After": str(exc.retry_after)})

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
