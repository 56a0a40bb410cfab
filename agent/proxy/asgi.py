"""Raw ASGI pieces for the proxy's forwarding path (no framework objects per request): read a request body,
answer JSON (and the body of an error, shaped as OpenAI's), find a header, and notice a client that went away."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Awaitable, Callable

Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]


class ClientGone(Exception):
    """The client disconnected before its request was read."""


def header(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    """The first value of header ``name`` (lower case, as ASGI gives names), latin-1 decoded."""
    for key, value in headers:
        if key == name:
            return value.decode("latin-1")
    return None


def raw_header(headers: list[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    """The first value of header ``name`` as the client sent its bytes."""
    for key, value in headers:
        if key == name:
            return value
    return None


async def read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body; None as soon as it exceeds ``limit`` bytes. ClientGone on a disconnect."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def send_json(send: Send, status: int, content: Any, headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    """A whole JSON answer (rendered as Starlette's JSONResponse renders it)."""
    body = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def error_body(status: int, kind: str, message: str, pool: str | None = None) -> dict:
    """An error answer's JSON body, as OpenAI's API shapes it; ``pool`` names the pool it concerns."""
    error: dict[str, Any] = {"type": kind, "message": message, "code": status}
    if pool is not None:
        error["pool"] = pool
    return {"error": error}


class Disconnect:
    """Cancels the current task when the client disconnects, once its request body is read.

    uvicorn's ``send`` does nothing on a closed connection, so a relay would read the engine's answer to its
    end for nobody; the only message ``receive`` still gives after the body is ``http.disconnect`` (uvicorn
    also gives it once the response is complete: ``finish()`` before the last ``send`` stops the watch from
    acting on that one). One task per request, no task group. After catching the CancelledError, ``gone``
    tells whether the client caused it (then call ``absorb()``), else it came from elsewhere and must go on.
    """

    __slots__ = ("gone", "_task", "_watch", "_finished")

    def __init__(self, receive: Receive):
        self.gone = False
        self._finished = False
        self._task = asyncio.current_task()
        self._watch = asyncio.ensure_future(receive())
        self._watch.add_done_callback(self._fired)

    def _fired(self, watch: asyncio.Future) -> None:
        if self._finished or watch.cancelled() or watch.exception() is not None:
            return
        self.gone = True
        self._task.cancel()

    def finish(self) -> None:
        """The answer is complete (or abandoned): stop watching."""
        self._finished = True
        self._watch.remove_done_callback(self._fired)
        self._watch.cancel()

    def absorb(self) -> None:
        """The cancellation came from the client's disconnect and was handled."""
        self._task.uncancel()
