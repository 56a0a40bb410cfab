"""A trivially fast stand-in for llama-server, for measuring the proxy's own cost (bench/proxy_overhead.py).

Plain asyncio streams, no HTTP library: keep-alive HTTP/1.1 with Content-Length request bodies. POST
/v1/completions, /v1/chat/completions and /completion answer a fixed llama.cpp-shaped completion (shapes
from the fixtures captured from llama-server b11434, tests/proxy/fixtures) with ``timings``; with
``"stream": true`` in the body, the same as server-sent events in chunked encoding, four chunks, the last
with ``timings``, then ``[DONE]``, each chunk its own write, headers as llama-server sends them. GET
/health, /props, /v1/models and /slots answer what the proxy's pool checks read. Anything else: 404.

    python bench/fast_upstream.py PORT
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from pathlib import Path

FIXTURES = json.loads((Path(__file__).resolve().parents[1] / "tests" / "proxy" / "fixtures" /
                       "llamacpp_b11434.json").read_text())
COMPLETION_PATHS = (b"/v1/completions", b"/v1/chat/completions", b"/completion")
TOKENS = 4


def _json(value) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _timings() -> dict:
    timings = dict(FIXTURES["timings_template"])
    timings.pop("draft_n", None)
    timings.pop("draft_n_accepted", None)
    return {**timings, "predicted_n": TOKENS}


def _answer(status: bytes, body: bytes, content_type: bytes = b"application/json; charset=utf-8") -> bytes:
    return (b"HTTP/1.1 " + status + b"\r\nServer: llama.cpp\r\nContent-Type: " + content_type +
            b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\nKeep-Alive: timeout=5, max=100\r\n\r\n" + body)


COMPLETION = _answer(b"200 OK", _json({**FIXTURES["completion_answer"], "timings": _timings()}))
STREAM_HEAD = (b"HTTP/1.1 200 OK\r\nServer: llama.cpp\r\nX-Accel-Buffering: no\r\nContent-Type: text/event-stream"
               b"\r\nTransfer-Encoding: chunked\r\nKeep-Alive: timeout=5, max=100\r\n\r\n")
_events = [b"data: " + _json(FIXTURES["completion_chunk"]) + b"\n\n"] * (TOKENS - 1)
_events += [b"data: " + _json({**FIXTURES["completion_chunk"], "timings": _timings()}) + b"\n\n", b"data: [DONE]\n\n"]
STREAM_CHUNKS = [b"%x\r\n%s\r\n" % (len(e), e) for e in _events] + [b"0\r\n\r\n"]
GETS = {b"/health": _answer(b"200 OK", _json(FIXTURES["health_ok"])),
        b"/props": _answer(b"200 OK", _json({**FIXTURES["props"], "model_path": "/models/fast-upstream.gguf"})),
        b"/v1/models": _answer(b"200 OK", _json(FIXTURES["models"])),
        b"/slots": _answer(b"200 OK", _json([{"id": 0, "speculative": False, "is_processing": False}]))}
NOT_FOUND = _answer(b"404 Not Found", _json(FIXTURES["error"]))


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes, bytes]:
    """(method, path, body) of the next request on the connection (Content-Length bodies only)."""
    head = await reader.readuntil(b"\r\n\r\n")
    method, target, _ = head.split(b"\r\n", 1)[0].split(b" ", 2)
    length = 0
    for line in head.split(b"\r\n")[1:]:
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    body = await reader.readexactly(length) if length else b""
    return method, target.split(b"?", 1)[0], body


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        while True:
            method, path, body = await read_request(reader)
            if method == b"POST" and path in COMPLETION_PATHS:
                if b'"stream":true' in body.replace(b" ", b""):
                    writer.write(STREAM_HEAD)
                    for chunk in STREAM_CHUNKS:
                        writer.write(chunk)
                        await writer.drain()
                else:
                    writer.write(COMPLETION)
            else:
                writer.write(GETS.get(path, NOT_FOUND) if method == b"GET" else NOT_FOUND)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def serve(port: int) -> None:
    server = await asyncio.start_server(handle, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1])))
