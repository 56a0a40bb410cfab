"""Bearer-token checks: the ingest routes' dependency and, with ``auth = all``, a gate in front of every
route but the probes (/healthz, /readyz), so decisions, alerts, metrics and the OpenAPI document (which
reveal model versions and host names) need the token too."""

from __future__ import annotations

import json
import secrets

PROBES = frozenset({"/healthz", "/readyz"})
MESSAGE = "missing or wrong bearer token (Authorization: Bearer <token>)"


def token_ok(authorization: str | None, token: str) -> bool:
    """Whether an Authorization header value carries ``token`` (compared in constant time)."""
    scheme, _, given = (authorization or "").partition(" ")
    given = given.strip() if scheme.lower() == "bearer" else ""
    return secrets.compare_digest(given.encode(), token.encode())


def bearer_of(authorization: str | None) -> str | None:
    """The credential of a ``Bearer`` Authorization header value (None without one)."""
    scheme, _, given = (authorization or "").partition(" ")
    return given.strip() or None if scheme.lower() == "bearer" else None


class TokenGate:
    """ASGI middleware: 401 for any HTTP request but the probes that lacks the token."""

    def __init__(self, app, token: str):
        self.app, self.token = app, token

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["path"] in PROBES:
            return await self.app(scope, receive, send)
        header = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"), None)
        if token_ok(header, self.token):
            return await self.app(scope, receive, send)
        body = json.dumps({"message": MESSAGE, "detail": None}).encode()
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", b"Bearer")]})
        await send({"type": "http.response.body", "body": body})
