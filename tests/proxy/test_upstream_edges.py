"""The proxy against raw upstreams (asyncio streams, no HTTP library) that misbehave at the HTTP level:
connections dropped, answers broken off, answers that never come, paths an HTTP library would rewrite."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from tests.proxy.servers import RawUpstream, answer_json, read_request
from tests.proxy.test_proxy import wait_for

MODELS = b'{"data": [{"id": "m"}]}'  # what the pool checks read (/props has no model_path: /v1/models names it)


def upstream(on_post):
    """An upstream answering every GET as a healthy engine and each POST with ``on_post(head, body, reader,
    writer)`` (which returns False to end the connection)."""
    async def handle(reader, writer):
        try:
            while True:
                head, body = await read_request(reader)
                if head.startswith(b"POST ") or head.startswith(b"PUT "):
                    if await on_post(head, body, reader, writer) is False:
                        return
                else:
                    answer_json(writer, MODELS)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
    return RawUpstream(handle)


def test_a_connection_dropped_before_any_answer_is_retried_once(proxy):
    """An engine that closes a kept-alive connection (restart, idle timeout) as a request arrives: the proxy
    sends the request once more on a fresh connection instead of answering 502."""
    dropped = []

    async def on_post(head, body, reader, writer):
        if not dropped:
            dropped.append(True)
            return False
        answer_json(writer, MODELS)

    with upstream(on_post) as up:
        url, _ = proxy({"off": up.url}, health_seconds=600.0)
        answer = httpx.post(f"{url}/v1/completions", json={"prompt": "p"})
        assert dropped and answer.status_code == 200 and answer.content == MODELS


def test_an_answer_broken_off_midway_is_cut_off_for_the_client_too(proxy):
    """The engine dies mid-stream: the client's stream must end in an error, not look complete."""
    event = b'data: {"choices":[{"text":"x","index":0}]}\n\n'

    async def on_post(head, body, reader, writer):
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                     b"%x\r\n%s\r\n" % (len(event), event))
        await writer.drain()
        await asyncio.sleep(0.1)
        return False

    with upstream(on_post) as up:
        url, runtime = proxy({"off": up.url}, health_seconds=600.0)
        received = b""
        with pytest.raises(httpx.RemoteProtocolError):
            with httpx.stream("POST", f"{url}/v1/completions", json={"prompt": "p", "stream": True}) as s:
                for chunk in s.iter_raw():
                    received += chunk
        assert received == event and runtime.taken == []
        assert 'specwatch_proxy_requests_total{pool="off",result="connect_error"} 1.0' in \
            httpx.get(f"{runtime.admin}/metrics").text


def test_a_client_gone_before_the_answer_closes_the_upstream_request(proxy):
    """A client that gives up while the engine is still working (no byte of the answer yet): the proxy closes
    its upstream connection at once (llama.cpp stops generating), not when its read timeout ends."""
    closed = []

    async def on_post(head, body, reader, writer):
        started = time.monotonic()
        await reader.read()  # never answers; returns at end of stream
        closed.append(time.monotonic() - started)
        return False

    with upstream(on_post) as up:
        url, runtime = proxy({"off": up.url}, health_seconds=600.0, read_seconds=60.0)
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{url}/v1/completions", json={"prompt": "p"}, timeout=0.3)
        wait_for(lambda: closed, timeout=3.0)
        assert closed[0] < 2.0 and runtime.taken == []


def test_the_path_and_query_go_upstream_as_the_client_sent_them(proxy):
    lines = []

    async def on_post(head, body, reader, writer):
        lines.append(head.split(b"\r\n", 1)[0])
        answer_json(writer, body)

    with upstream(on_post) as up:
        url, _ = proxy({"off": up.url}, health_seconds=600.0)
        answer = httpx.put(f"{url}/a%2Fb/c%20d?x=%2F&y=%C3%A9", content=b"raw")
        assert answer.content == b"raw" and lines == [b"PUT /a%2Fb/c%20d?x=%2F&y=%C3%A9 HTTP/1.1"]


def test_methods_that_are_not_forwarded_are_refused(proxy):
    seen = []

    async def on_post(head, body, reader, writer):
        seen.append(head)
        answer_json(writer, b"{}")

    with upstream(on_post) as up:
        url, _ = proxy({"off": up.url}, health_seconds=600.0)
        answer = httpx.request("TRACE", f"{url}/v1/models")
        assert answer.status_code == 405 and "POST" in answer.headers["allow"] and seen == []


def test_headers_reach_the_engine_as_sent_and_an_expect_header_stays_with_the_proxy(proxy):
    """Header values byte for byte (UTF-8 included); Expect: 100-continue is the proxy's business (it has
    the whole body), so an engine that never answers 100 Continue still gets the body at once."""
    heads = []

    async def on_post(head, body, reader, writer):
        heads.append(head)
        answer_json(writer, body)

    with upstream(on_post) as up:
        url, _ = proxy({"off": up.url}, health_seconds=600.0, read_seconds=3.0)
        answer = httpx.post(f"{url}/v1/completions", content=b'{"prompt": "p"}', timeout=10.0,
                            headers={"x-note": "caf\u00e9 \u2603".encode(), "expect": "100-continue"})
        assert answer.status_code == 200 and answer.content == b'{"prompt": "p"}'
        assert "x-note: caf\u00e9 \u2603\r\n".encode() in heads[0] and b"expect" not in heads[0].lower()
