"""What the HTTP sinks share: one httpx client, a timeout, and which failures are worth a retry."""

from __future__ import annotations

from typing import Any

import httpx

from alerts.sinks.base import RejectedError, Sink
from specwatch_core.redact import redact, redact_url, remember_url

# The receiver is busy or timed out: the same request may well succeed later.
_RETRY_4XX = {408, 425, 429}


class HttpSink(Sink):
    """POSTs JSON to ``url``. Connection errors, timeouts and 5xx raise for a retry; other 4xx reject.
    The URL often carries a credential (userinfo, a token in the query or path): errors and repr show it
    redacted (specwatch_core/redact.py), and its secrets are registered so no log line shows them."""

    def __init__(self, url: str, *, timeout: float = 5.0, headers: dict[str, str] | None = None,
                 transport: httpx.BaseTransport | None = None):
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"{self.name} URL must start with http:// or https://, got {redact_url(url)!r}")
        remember_url(url)
        self.url = url
        self._client = httpx.Client(timeout=timeout, headers=headers, transport=transport)

    def post(self, body: Any) -> httpx.Response:
        try:
            response = self._client.post(self.url, json=body)
        except httpx.HTTPError as exc:  # its message may quote the URL
            exc.args = (redact(f"{self.name} {redact_url(self.url)}: {exc}"),)
            raise
        if 400 <= response.status_code < 500 and response.status_code not in _RETRY_4XX:
            raise RejectedError(f"{self.name} {redact_url(self.url)} refused the alerts: HTTP "
                                f"{response.status_code} {redact(response.text[:200])}")
        if response.status_code >= 400:  # httpx's own message quotes the URL
            raise httpx.HTTPStatusError(f"{self.name} {redact_url(self.url)} answered HTTP {response.status_code}",
                                        request=response.request, response=response)
        return response

    def close(self) -> None:
        self._client.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({redact_url(self.url)!r})"
