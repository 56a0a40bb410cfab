"""An engine's answer -> one aggregate StepRecord per request.

llama.cpp's server ends every completion answer (in streaming: the last chunk carrying it) with ``timings``:
``predicted_n`` tokens generated in ``predicted_ms``, and when something was drafted ``draft_n`` tokens
drafted of which ``draft_n_accepted`` were accepted. Each verification pass emits its accepted tokens plus
one bonus token, so the request took ``predicted_n - draft_n_accepted`` target passes (steps). Time is not
split between draft and verify: it goes in ``seconds``. The prompt's evaluation before the first step
(``prompt_ms``) goes in ``prompt_seconds`` when the engine reports it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from specwatch_core.records import RecordError, StepRecord


@dataclass(frozen=True, slots=True)
class Served:
    """What the proxy knows about the request besides the engine's figures."""

    domain: str
    pool: str
    lookahead: int
    target_version: str
    draft_version: str
    request_id: str | None = None
    pod: str | None = None


def aggregate(timings: Any, served: Served, timestamp: float) -> StepRecord | None:
    """The request's record, or None when ``timings`` gives nothing to record (missing, malformed, no token
    generated). A record the contract refuses (e.g. more drafted than the pool's K allows) raises
    RecordError naming the field."""
    if not isinstance(timings, dict):
        return None
    emitted, ms = timings.get("predicted_n"), timings.get("predicted_ms")
    if not _count(emitted) or emitted < 1 or not _number(ms) or ms < 0:
        return None
    drafted = timings.get("draft_n", 0)
    accepted = timings.get("draft_n_accepted", 0)
    if not (_count(drafted) and _count(accepted)):
        return None
    if served.lookahead == 0 and drafted:
        raise RecordError("drafted", f"pool {served.pool} serves without a draft but the engine drafted {drafted}")
    steps = emitted - accepted
    if steps < 1:
        raise RecordError("steps", f"predicted_n={emitted} with draft_n_accepted={accepted} leaves no step")
    prompt_ms = timings.get("prompt_ms")
    prompt = prompt_ms / 1000.0 if _number(prompt_ms) and prompt_ms >= 0 else None
    record = StepRecord(
        domain=served.domain, lookahead=served.lookahead, accepted=accepted, emitted=emitted,
        draft_seconds=0.0, verify_seconds=0.0, seconds=ms / 1000.0, steps=steps, drafted=drafted,
        pool=served.pool, target_version=served.target_version, draft_version=served.draft_version,
        timestamp=timestamp, pod=served.pod, request_id=served.request_id, prompt_seconds=prompt)
    return record.validate()


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _number(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


class SSETimings:
    """Finds the last ``timings`` object in a server-sent event stream fed chunk by chunk.

    Only the current incomplete line is kept between chunks (the stream itself goes to the client
    untouched); only ``data:`` lines that mention ``"timings"`` are parsed.
    """

    __slots__ = ("timings", "_partial")

    def __init__(self) -> None:
        self.timings: dict | None = None
        self._partial = b""

    def feed(self, chunk: bytes) -> None:
        if self._partial:
            chunk = self._partial + chunk
        end = chunk.rfind(b"\n")
        if end < 0:
            self._partial = chunk
            return
        self._partial = chunk[end + 1:]
        if b'"timings"' not in chunk:
            return
        for line in chunk[:end].split(b"\n"):
            if line.startswith(b"data:") and b'"timings"' in line:
                self._take(line[5:])

    def close(self) -> None:
        """The stream ended: a last line without a newline counts too."""
        if self._partial.startswith(b"data:") and b'"timings"' in self._partial:
            self._take(self._partial[5:])
        self._partial = b""

    def _take(self, payload: bytes) -> None:
        try:
            event = json.loads(payload)
        except ValueError:
            return
        found = event.get("timings") if isinstance(event, dict) else None
        if isinstance(found, dict):
            self.timings = found


def body_timings(body: bytes) -> dict | None:
    """``timings`` of a whole (non-streamed) JSON answer."""
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    found = answer.get("timings") if isinstance(answer, dict) else None
    return found if isinstance(found, dict) else None
