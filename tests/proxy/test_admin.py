"""The two listeners: a client of the inference port sees the engine (and the proxy's /health), nothing of
specwatch; specwatch's own routes answer on the admin listener, behind the token when one is set."""

from __future__ import annotations

import logging
import socket

import httpx
import pytest

from agent.proxy.config import ProxyConfig, Upstream
from agent.proxy.listeners import ListenError, bind
from agent.runtime.config import SidecarConfig
from tests.proxy.fake_engine import FakeEngine
from tests.proxy.servers import free_port

TOKEN = "t" * 24
ADMIN = ("/metrics", "/alerts", "/decision?domain=code", "/pools", "/sample")
# Every path specwatch answered on the inference port before it had an admin listener, and the admin ones.
SPECWATCH = ("/specwatch/metrics", "/specwatch/alerts", "/specwatch/decision?domain=code", "/specwatch/pools",
             "/specwatch/sample", "/alerts", "/decision?domain=code", "/pools", "/sample")


def test_an_anonymous_client_of_the_inference_port_reaches_the_engine_not_specwatch(engines, proxy):
    engine = FakeEngine(lookahead=4, accepted=2)
    direct = engines(engine)
    url, _ = proxy({"k4": direct}, sidecar_options={"token": TOKEN, "sample_prompts": 4})
    httpx.post(f"{url}/v1/completions", json={"prompt": "p", "max_tokens": 4}, headers={"X-Specwatch-Domain": "code"})
    for path in SPECWATCH:
        through, plain = httpx.get(url + path), httpx.get(direct + path)
        assert (through.status_code, through.content) == (plain.status_code, plain.content) == (404, b"Not Found"), path
        assert through.headers["x-specwatch-pool"] == "k4", path  # forwarded, answered by the engine
    health = httpx.get(f"{url}/health")
    assert health.json() == {"status": "ok", "pools": {"k4": True}} and "x-specwatch-pool" not in health.headers


@pytest.mark.parametrize("path", ["/metrics", "/props"])
def test_the_engine_metrics_and_props_pass_through_unchanged(engines, proxy, path):
    engine = FakeEngine(lookahead=4, accepted=3)
    direct = engines(engine)
    url, _ = proxy({"k4": direct}, sidecar_options={"token": TOKEN})
    httpx.post(f"{url}/v1/completions", json={"prompt": "p", "max_tokens": 8})  # the engine's counters move
    through, plain = httpx.get(url + path), httpx.get(direct + path)
    assert through.status_code == plain.status_code == 200
    assert through.content == plain.content and through.headers["content-type"] == plain.headers["content-type"]
    assert b"specwatch_" not in through.content


def test_the_admin_routes_refuse_a_missing_or_wrong_token(engines, proxy):
    url, runtime = proxy({"k4": engines(FakeEngine(lookahead=4, accepted=2))},
                         sidecar_options={"token": TOKEN, "sample_prompts": 4})
    httpx.post(f"{url}/v1/completions", json={"prompt": "p", "max_tokens": 4}, headers={"X-Specwatch-Domain": "code"})
    for path in ADMIN:
        for header in (None, f"Bearer {'x' * 24}", f"Bearer {TOKEN[:-1]}", f"Basic {TOKEN}", TOKEN):
            answer = httpx.get(runtime.admin + path, headers={"Authorization": header} if header else {})
            assert answer.status_code == 401 and answer.headers["www-authenticate"] == "Bearer", (path, header)
            assert "specwatch_" not in answer.text and "k4" not in answer.text
        answer = httpx.get(runtime.admin + path, headers={"Authorization": f"Bearer {TOKEN}"})
        assert answer.status_code == 200, path
    metrics = httpx.get(f"{runtime.admin}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).text
    assert 'specwatch_proxy_requests_total{pool="k4",result="recorded"} 1.0' in metrics


def test_without_a_token_the_admin_routes_answer_anyone_who_reaches_them(engines, proxy):
    _, runtime = proxy({"off": engines(FakeEngine())}, sidecar_options={"sample_prompts": 4})
    assert [httpx.get(runtime.admin + path).status_code for path in ADMIN] == [200] * len(ADMIN)


def test_the_admin_listener_forwards_nothing(engines, proxy):
    engine = FakeEngine()
    _, runtime = proxy({"off": engines(engine)})
    assert httpx.post(f"{runtime.admin}/v1/completions", json={"prompt": "p"}).status_code == 404
    assert httpx.get(f"{runtime.admin}/props").status_code == 404
    assert httpx.get(f"{runtime.admin}/health").status_code == 404
    assert engine.requests == [] and runtime.taken == []


def config(token: str | None = None, **options) -> ProxyConfig:
    return ProxyConfig((Upstream.parse("off=http://127.0.0.1:1"),), sidecar=SidecarConfig(policy="pool-model",
                                                                                        token=token), **options)


@pytest.mark.parametrize("host, token, warned", [("0.0.0.0", None, True), ("0.0.0.0", TOKEN, False),
                                                 ("127.0.0.1", None, False)])
def test_an_admin_listener_beyond_loopback_without_a_token_is_warned_at_start(caplog, host, token, warned):
    with caplog.at_level(logging.WARNING, logger="specwatch.proxy"):
        listeners = bind(config(token, port=0, admin_host=host, admin_port=0))
    for sock in listeners.sockets:
        sock.close()
    assert ("admin listener on http://0.0.0.0:" in caplog.text and "without a token" in caplog.text) is warned


def test_the_admin_listener_needs_a_port_of_its_own():
    port = free_port()
    with pytest.raises(ListenError, match=f"admin listener: port {port} is the inference listener's"):
        bind(config(port=port, admin_port=port))
    with socket.socket() as again:  # the inference socket bound before the refusal was closed
        again.bind(("127.0.0.1", port))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        with pytest.raises(ListenError, match=f"admin listener: cannot listen on 127.0.0.1:{taken.getsockname()[1]}"):
            bind(config(port=0, admin_port=taken.getsockname()[1]))
