"""``specwatch scrape``'s I/O: GET an engine's pages, and send records to the store or a running sidecar."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from typing import Protocol
from urllib.parse import urljoin

import httpx

from specwatch_core.records import StepRecord

POST_BATCH = 2000  # records per POST /v1/steps: well under the sidecar's default 4 MiB body limit


class Sink(Protocol):
    def write(self, records: Sequence[StepRecord]) -> None: ...


def fetch(client: httpx.Client, url: str) -> str:
    """GET a metrics page; raises httpx.HTTPError on a transport failure or a non-2xx status."""
    response = client.get(url, headers={"Accept": "text/plain;version=0.0.4"})
    response.raise_for_status()
    return response.text


def fetch_model(client: httpx.Client, metrics_url: str, path: str, parse: Callable[[dict], str | None]) -> str | None:
    """The served model from ``path`` on the metrics page's host (e.g. llama.cpp's /v1/models), or None
    when that fails: the model is a label for records, never a reason to stop scraping."""
    try:
        response = client.get(urljoin(metrics_url, path))
        response.raise_for_status()
        return parse(response.json())
    except (httpx.HTTPError, ValueError):
        return None


class StoreSink:
    """Writes records through Store.write_records and flushes closed windows."""

    def __init__(self, store):
        self.store = store

    def write(self, records: Sequence[StepRecord]) -> None:
        self.store.write_records(records)
        self.store.flush()


class Rejected(ValueError):
    """The sidecar refused the records (4xx: invalid records, a wrong token): retrying cannot help."""


class SidecarSink:
    """POSTs records to a running sidecar's /v1/steps in batches; raises httpx.HTTPError on failure.

    Each batch carries an ``Idempotency-Key`` of its own and keeps it over up to ``attempts`` tries (a
    transport error, 429 or 5xx; waiting Retry-After, at most ``max_wait`` seconds): a batch whose first
    answer was lost is stored once, not twice."""

    def __init__(self, client: httpx.Client, base_url: str, token: str | None = None, *, attempts: int = 3,
                 max_wait: float = 5.0, sleep: Callable[[float], None] = time.sleep):
        self.client, self.url = client, base_url.rstrip("/") + "/v1/steps"
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.attempts, self.max_wait, self._sleep = attempts, max_wait, sleep

    def write(self, records: Sequence[StepRecord]) -> None:
        for start in range(0, len(records), POST_BATCH):
            body = {"records": [r.to_dict() for r in records[start:start + POST_BATCH]]}
            self._post(body, {**self.headers, "Idempotency-Key": uuid.uuid4().hex})

    def _post(self, body: dict, headers: dict[str, str]) -> None:
        for attempt in range(1, self.attempts + 1):
            try:
                response = self.client.post(self.url, json=body, headers=headers)
            except httpx.TransportError:
                if attempt == self.attempts:
                    raise
                self._sleep(min(self.max_wait, 0.5 * attempt))
                continue
            if response.status_code == 202:
                return
            message = f"POST {self.url}: {response.status_code} {response.text[:300]}"
            if 400 <= response.status_code < 500 and response.status_code != 429:
                raise Rejected(message)
            if attempt == self.attempts:
                raise httpx.HTTPStatusError(message, request=response.request, response=response)
            self._sleep(min(self.max_wait, _retry_after(response) or 0.5 * attempt))


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return max(0.0, float(response.headers.get("Retry-After", "")))
    except ValueError:
        return None
