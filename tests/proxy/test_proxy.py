"""The proxy in front of fake llama.cpp engines: records, streaming, passthrough, errors."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.proxy.fake_engine import FIXTURES, FakeEngine


def wait_for(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


def test_one_aggregate_record_per_request_from_the_engine_timings(engines, proxy):
    engine = FakeEngine(lookahead=4, accepted=2)
    url, runtime = proxy({"k4": engines(engine)})
    answer = httpx.post(f"{url}/v1/completions", json={"prompt": "hi", "max_tokens": 16},
                        headers={"X-Specwatch-Domain": "code", "X-Request-Id": "r1"})
    assert answer.status_code == 200 and answer.headers["x-specwatch-pool"] == "k4"
    t = answer.json()["timings"]
    wait_for(lambda: runtime.taken)
    (r,) = runtime.taken
    assert (r.domain, r.pool, r.lookahead, r.request_id) == ("code", "k4", 4, "r1")
    assert (r.drafted, r.accepted, r.emitted) == (t["draft_n"], t["draft_n_accepted"], t["predicted_n"])
    assert r.steps == t["predicted_n"] - t["draft_n_accepted"]
    assert r.seconds == pytest.approx(t["predicted_ms"] / 1000)
    assert r.target_version == "target.gguf"  # the fake's model path does not exist here: its base name


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions", "/completion"])
def test_streamed_answers_pass_unchanged_and_the_last_chunk_timings_are_recorded(engines, proxy, path):
    engine = FakeEngine(lookahead=3, accepted=3)
    direct = engines(engine)
    url, runtime = proxy({"k3": direct})
    body = {"prompt": "p", "messages": [{"role": "user", "content": "p"}], "max_tokens": 12, "stream": True}
    through = httpx.post(url + path, json=body, headers={"X-Specwatch-Domain": "chat"})
    plain = httpx.post(direct + path, json=body)
    assert through.content == plain.content and through.headers["content-type"] == plain.headers["content-type"]
    wait_for(lambda: runtime.taken)
    last = [json.loads(line[6:]) for line in plain.text.splitlines() if '"timings"' in line][-1]["timings"]
    (r,) = runtime.taken
    assert (r.domain, r.emitted, r.drafted, r.accepted) == ("chat", 12, last["draft_n"], last["draft_n_accepted"])


def test_stream_chunks_reach_the_client_before_the_answer_ends(engines, proxy):
    engine = FakeEngine()
    engine.chunk_delay = 0.3
    url, _ = proxy({"off": engines(engine)})
    with httpx.stream("POST", f"{url}/v1/completions", json={"prompt": "p", "max_tokens": 5, "stream": True}) as s:
        started = time.monotonic()
        first = next(s.iter_raw())
        assert first.startswith(b"data: ") and time.monotonic() - started < 1.0  # the whole answer takes 1.5 s


def test_other_paths_and_methods_pass_through_byte_for_byte(engines, proxy):
    url, _ = proxy({"off": engines(FakeEngine())})
    answer = httpx.put(f"{url}/echo?a=1&b=%20", content=b"\x00raw body", headers={"X-Custom": "v"})
    echoed = answer.json()
    assert (echoed["method"], echoed["path"], echoed["query"], echoed["body"]) == ("PUT", "/echo", "a=1&b=%20",
                                                                                   "\x00raw body")
    assert echoed["headers"]["x-custom"] == "v" and answer.headers["x-engine"] == "fake"
    assert httpx.get(f"{url}/v1/models").json() == FIXTURES["models"]


def test_health_is_the_proxy_own(engines, proxy):
    engine = FakeEngine()
    url, _ = proxy({"off": engines(engine)})
    assert httpx.get(f"{url}/health").json() == {"status": "ok", "pools": {"off": True}}
    engine.healthy = False
    wait_for(lambda: httpx.get(f"{url}/health").status_code == 503)


def test_an_invalid_domain_header_is_refused_naming_it(engines, proxy):
    engine = FakeEngine()
    url, runtime = proxy({"off": engines(engine)})
    answer = httpx.post(f"{url}/v1/completions", json={"prompt": "p"}, headers={"X-Specwatch-Domain": "x" * 65})
    assert answer.status_code == 400 and "X-Specwatch-Domain" in answer.json()["error"]["message"]
    assert engine.requests == [] and runtime.taken == []


def test_domain_rules_and_the_header_stays_with_the_proxy(engines, proxy):
    from agent.proxy.domains import DomainRule

    engine = FakeEngine()
    url, runtime = proxy({"off": engines(engine)}, rules=(DomainRule.parse("model:coder=code"),
                                                          DomainRule.parse("metadata:topic")))
    httpx.post(f"{url}/v1/completions", json={"model": "coder", "prompt": "p", "max_tokens": 2})
    httpx.post(f"{url}/v1/completions", json={"prompt": "p", "max_tokens": 2, "metadata": {"topic": "law"}})
    httpx.post(f"{url}/v1/completions", json={"prompt": "p", "max_tokens": 2}, headers={"X-Specwatch-Domain": "h"})
    httpx.post(f"{url}/v1/completions", json={"prompt": "p", "max_tokens": 2})
    wait_for(lambda: len(runtime.taken) == 4)
    assert [r.domain for r in runtime.taken] == ["code", "law", "h", "default"]
    assert all("x-specwatch-domain" not in h for h in engine.headers)


def test_engine_errors_reach_the_client_unchanged_and_record_nothing(engines, proxy):
    engine = FakeEngine()
    engine.status = 500
    direct = engines(engine)
    url, runtime = proxy({"off": direct})
    through = httpx.post(f"{url}/v1/completions", json={"prompt": "p"})
    plain = httpx.post(f"{direct}/v1/completions", json={"prompt": "p"})
    assert (through.status_code, through.content) == (500, plain.content)
    time.sleep(0.1)
    assert runtime.taken == []
    assert 'result="engine_error"' in httpx.get(f"{runtime.admin}/metrics").text


def test_unreachable_pool_gives_502_naming_it(engines, proxy):
    engine = FakeEngine()
    url, runtime = proxy({"k2": engines(engine)}, health_seconds=60.0)
    engines.stack.close()  # the engine goes away; the pool stays in rotation until its next check
    answer = httpx.post(f"{url}/v1/completions", json={"prompt": "p"})
    assert answer.status_code == 502 and answer.json()["error"]["pool"] == "k2"


def test_slow_pool_gives_504_naming_it(engines, proxy):
    engine = FakeEngine()
    engine.delay = 2.0
    url, _ = proxy({"k2": engines(engine)}, read_seconds=0.3)
    answer = httpx.post(f"{url}/v1/completions", json={"prompt": "p"})
    assert answer.status_code == 504
    error = answer.json()["error"]
    assert error["pool"] == "k2" and "0.3 s" in error["message"]


def test_client_disconnect_cancels_the_upstream_request(engines, proxy):
    engine = FakeEngine()
    engine.chunk_delay = 0.1
    url, runtime = proxy({"off": engines(engine)})
    with httpx.stream("POST", f"{url}/v1/completions", json={"prompt": "p", "max_tokens": 100, "stream": True}) as s:
        next(s.iter_raw())
    wait_for(lambda: engine.disconnected == 1, timeout=30)  # seconds on a busy machine
    assert engine.finished == 0 and runtime.taken == []


def test_sampled_prompts_are_what_the_guard_reads(engines, proxy, tmp_path):
    from agent.guard.sample import load_sample

    token = "s" * 24
    url, runtime = proxy({"k4": engines(FakeEngine(lookahead=4, accepted=2))},
                   sidecar_options={"sample_prompts": 8, "token": token})
    for path, body, domain in (
            ("/v1/completions", {"prompt": "def f():", "max_tokens": 4}, "code"),
            ("/v1/chat/completions", {"messages": [{"role": "system", "content": "Be brief."},
                                                   {"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
                                      "max_tokens": 4}, "chat"),
            ("/completion", {"prompt": [17, 42], "max_tokens": 4}, "code"),  # token ids: not sampled
            ("/completion", {"prompt": "SELECT", "max_tokens": 4}, "sql")):
        assert httpx.post(url + path, json=body, headers={"X-Specwatch-Domain": domain}).status_code == 200
    assert httpx.get(f"{runtime.admin}/sample").status_code == 401
    answer = httpx.get(f"{runtime.admin}/sample", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/x-ndjson")
    path = tmp_path / "sample.jsonl"
    path.write_text(answer.text)
    assert load_sample(path, lambda text: list(text.encode())) == {
        "chat": [list(b"Be brief.\nHi")], "code": [list(b"def f():")], "sql": [list(b"SELECT")]}


def test_without_sampling_the_sample_route_says_how_to_turn_it_on(engines, proxy):
    _, runtime = proxy({"off": engines(FakeEngine())})
    answer = httpx.get(f"{runtime.admin}/sample")
    assert answer.status_code == 404 and "sample_prompts" in answer.json()["error"]["message"]
