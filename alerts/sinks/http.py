"""What the HTTP sinks share: one httpx client, a timeout, and which failures are worth a retry."""

from __future__ import annotations

from typing import Any

import httpx

from alerts.sinks.base import RejectedError, Sink

# The receiver is busy or timed out: the same request may well succeed later.
_RETRY_4XX = {408, 425, 429}


class HttpSink(Sink):
    """POSTs JSON to ``url``. Connection errors, timeouts and 5xx raise for a retry; other 4xx reject."""

    def __init__(self, url: str, *, timeout: float = 5.0, headers: dict[str, str] | None = None,
                 transport: httpx.BaseTransport | None = None):
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"{self.name} URL must start with http:// or https://, got {url!r}")
        self.url = url
        self._client = httpx.Client(timeout=timeout, headers=headers, transport=transport)

    def post(self, body: Any) -> httpx.Response:
        response = self._client.post(self.url, json=body)
        if 400 <= response.status_code < 500 and response.status_code not in _RETRY_4XX:
            raise RejectedError(f"{self.name} {self.url} refused the alerts: HTTP {response.status_code} "
                                f"{response.text[:200]}")
        response.raise_for_status()
        return response

    def close(self) -> None:
        self._client.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"
