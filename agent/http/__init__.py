"""The sidecar's HTTP edge, `specwatch serve`: the FastAPI app (``api``, its bodies in ``api_models``),
bearer tokens (``auth``), strict JSON (``strict_json``), ``Idempotency-Key`` (``idempotency``), what the API
refuses rather than queue (``limits``), /readyz off the database (``readiness``), uvicorn's header timeout
(``timeouts``) and the command's server (``serve``).
"""
