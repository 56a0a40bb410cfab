"""Failover: a pool that cannot be reached leaves rotation at once and its request goes to the next healthy
pool, but only while the engine cannot have begun on it (refused, or dropped before the answer's head, also
on a fresh connection); an answer that started, or an engine that is slow, is never sent again."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.proxy.fake_engine import FakeEngine
from tests.proxy.servers import Running, answer_json
from tests.proxy.test_proxy import wait_for
from tests.proxy.test_upstream_edges import MODELS, upstream

BODY = {"prompt": "p", "max_tokens": 6}


def post(url: str, domain: str = "code") -> httpx.Response:
    return httpx.post(f"{url}/v1/completions", json=BODY, headers={"X-Specwatch-Domain": domain}, timeout=20)


def pin(runtime, name: str) -> None:
    """Route every request to pool ``name`` while it is healthy (the policy would spread them)."""
    pinned, pool_for = runtime.proxy.pools.by_name[name], runtime.proxy.router.pool_for
    runtime.proxy.router.pool_for = lambda k, healthy: pinned if pinned in healthy else pool_for(k, healthy)


def failovers(runtime) -> str:
    return httpx.get(runtime.admin + "/metrics").text


def test_a_refused_pool_fails_over_at_once_and_leaves_rotation(engines, proxy):
    off = FakeEngine()
    gone = FakeEngine(lookahead=4, accepted=2)
    with Running(gone.app) as k4_server:
        url, runtime = proxy({"k4": k4_server.url, "off": engines(off)}, health_seconds=600.0)
        pin(runtime, "k4")
        assert post(url).headers["x-specwatch-pool"] == "k4"
    answer = post(url)  # k4's server is gone: its port refuses; the next check is 600 s away
    assert answer.status_code == 200 and answer.headers["x-specwatch-pool"] == "off"
    k4 = runtime.proxy.pools.by_name["k4"]
    assert not k4.healthy and "could not reach it" in k4.error
    wait_for(lambda: len(runtime.taken) == 2)
    assert [r.pool for r in runtime.taken] == ["k4", "off"]  # the record is the answering pool's
    assert post(url).headers["x-specwatch-pool"] == "off" and len(off.requests) == 2
    text = failovers(runtime)
    assert 'specwatch_proxy_failovers_total{from_pool="k4"} 1.0' in text  # once: then it was out of rotation
    assert 'specwatch_proxy_pool_healthy{pool="k4"} 0.0' in text


def test_a_pool_that_drops_every_request_unanswered_is_tried_on_a_fresh_connection_then_failed_over(engines, proxy):
    dropped = []

    async def on_post(head, body, reader, writer):
        dropped.append(head)
        return False  # closed before any answer (a crashing engine)

    off = FakeEngine()
    with upstream(on_post) as bad:
        url, runtime = proxy({"k4": bad.url, "off": engines(off)}, health_seconds=600.0)
        pin(runtime, "k4")
        answer = post(url)
    assert answer.status_code == 200 and answer.headers["x-specwatch-pool"] == "off"
    assert len(dropped) == 2 and len(off.requests) == 1  # the kept-alive connection, a fresh one; then off
    assert not runtime.proxy.pools.by_name["k4"].healthy


@pytest.mark.parametrize("fault", ["answer started", "slow engine"])
def test_a_request_the_engine_may_have_begun_is_never_sent_again(engines, proxy, fault):
    seen = []

    async def on_post(head, body, reader, writer):
        seen.append(head)
        if fault == "slow engine":
            await asyncio.sleep(3.0)  # past read_seconds: it may be generating
            answer_json(writer, MODELS)
            return None
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"cho")
        await writer.drain()
        return False  # broken off after the head and some bytes

    off = FakeEngine()
    with upstream(on_post) as bad:
        url, runtime = proxy({"k4": bad.url, "off": engines(off)}, health_seconds=600.0, read_seconds=1.0)
        pin(runtime, "k4")
        if fault == "slow engine":
            answer = post(url)
            assert answer.status_code == 504 and answer.json()["error"]["pool"] == "k4"
        else:
            with pytest.raises(httpx.HTTPError):  # the client sees the answer cut, not a second one
                post(url)
        assert len(seen) == 1 and off.requests == []
        assert runtime.proxy.pools.by_name["k4"].healthy  # an engine that answered is up


def test_when_no_pool_can_be_reached_the_answer_is_502_naming_them(proxy):
    a, b = FakeEngine(lookahead=4), FakeEngine()
    with Running(a.app) as k4_server, Running(b.app) as off_server:
        url, runtime = proxy({"k4": k4_server.url, "off": off_server.url}, health_seconds=600.0)
        pin(runtime, "k4")
    answer = post(url)
    assert answer.status_code == 502
    error = answer.json()["error"]
    assert error["type"] == "upstream_unreachable" and error["pool"] == "off" and "tried k4, off" in error["message"]
    assert not any(p.healthy for p in runtime.proxy.pools.all)
    assert post(url).status_code == 503  # nothing healthy now: said at once, nothing tried
