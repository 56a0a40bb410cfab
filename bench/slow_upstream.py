"""A stand-in for llama-server whose answers take time, for the proxy's fault rows (bench/fault_rows_proxy.py):
a completion of ``max_tokens`` tokens (16 when absent) takes ``GAP`` seconds per token. Streamed (``"stream":
true``), one server-sent event per token, ``GAP`` seconds apart, the last carrying ``timings``, then
``[DONE]``; else the whole answer after ``max_tokens x GAP`` seconds. Answers are shaped as
bench/fast_upstream.py's (llama-server b11434's, no draft); GETs answer what the proxy's pool checks read.

    python bench/slow_upstream.py PORT GAP
"""

from __future__ import annotations

import asyncio
import json
import sys

from fast_upstream import FIXTURES, GETS, NOT_FOUND, STREAM_HEAD, _answer, _json, _timings, read_request

COMPLETION_PATHS = (b"/v1/completions", b"/v1/chat/completions", b"/completion")


def _tokens(body: bytes) -> int:
    try:
        asked = json.loads(body).get("max_tokens", 16)
    except (ValueError, AttributeError):
        return 16
    return asked if type(asked) is int and 1 <= asked <= 100_000 else 16


def _chunk(event: dict | str) -> bytes:
    data = b"data: " + (event.encode() if isinstance(event, str) else _json(event)) + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


async def _complete(writer: asyncio.StreamWriter, body: bytes, gap: float) -> None:
    n = _tokens(body)
    timings = {**_timings(), "predicted_n": n, "predicted_ms": 1000.0 * gap * n}
    if b'"stream":true' not in body.replace(b" ", b""):
        await asyncio.sleep(gap * n)
        answer = {**FIXTURES["completion_answer"], "timings": timings}
        writer.write(_answer(b"200 OK", _json(answer)))
        return
    writer.write(STREAM_HEAD)
    for i in range(n):
        await asyncio.sleep(gap)
        event = dict(FIXTURES["completion_chunk"])
        if i == n - 1:
            event["timings"] = timings
        writer.write(_chunk(event))
        await writer.drain()
    writer.write(_chunk("[DONE]") + b"0\r\n\r\n")


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, gap: float) -> None:
    try:
        while True:
            method, path, body = await read_request(reader)
            if method == b"POST" and path in COMPLETION_PATHS:
                await _complete(writer, body, gap)
            else:
                writer.write(GETS.get(path, NOT_FOUND) if method == b"GET" else NOT_FOUND)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def serve(port: int, gap: float) -> None:
    server = await asyncio.start_server(lambda r, w: handle(r, w, gap), "127.0.0.1", port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1]), float(sys.argv[2])))
