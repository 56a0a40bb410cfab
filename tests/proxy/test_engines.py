"""The proxy in front of stand-in vLLM, SGLang and TensorRT-LLM servers (tests/proxy/standins.py, answering in
each engine's own format): per-domain drafted and accepted tokens stored equal the sums of the engines'
per-request figures exactly, plain and streamed, with concurrent requests; missing per-request figures are
reported once per pool and become pool-level records from the engine's counters; errors pass unchanged."""

from __future__ import annotations

import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent.proxy.engines.pool_level import POOL_DOMAIN
from storage.query import StatsQuery
from tests.proxy.standins import FIXTURES, SglangStandIn, TrtllmStandIn, VllmStandIn
from tests.proxy.test_proxy import wait_for

DOMAINS = ("code", "prose", "chat")


def send(url: str, path: str, body: dict, domain: str) -> dict:
    """One request; the figures the engine put in its answer, as a client reads them."""
    answer = httpx.post(url + path, json=body, headers={"X-Specwatch-Domain": domain}, timeout=30)
    assert answer.status_code == 200, answer.text
    if body.get("stream"):
        events = [json.loads(line[6:]) for line in answer.text.splitlines()
                  if line.startswith("data: {")]
        last = events[-1]
    else:
        last = answer.json()
    return last


def vllm_figures(answer: dict) -> tuple[int, int]:
    spec = (answer.get("metrics") or {}).get("speculative_decoding") or {}
    return spec.get("num_draft_tokens", 0), spec.get("num_accepted_draft_tokens", 0)


def sglang_figures(answer: dict) -> tuple[int, int]:
    meta = answer.get("meta_info") or answer["choices"][0]["meta_info"]
    return (meta.get("spec_num_proposed_drafts", meta.get("spec_draft_token_num", 0)),
            meta.get("spec_num_correct_drafts", meta.get("spec_accept_token_num", 0)))


def run(url: str, jobs: list[tuple[str, dict, str]], figures) -> dict[str, tuple[int, int]]:
    """Send ``jobs`` (path, body, domain) eight at a time; per domain the summed (drafted, accepted)."""
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda job: (job[2], send(url, *job)), jobs))
    out: dict[str, tuple[int, int]] = {}
    for domain, answer in answers:
        d, a = figures(answer)
        was = out.get(domain, (0, 0))
        out[domain] = (was[0] + d, was[1] + a)
    return out


def stored(runtime, count: int) -> dict[str, tuple[int, int]]:
    wait_for(lambda: len(runtime.taken) >= count)
    runtime.sidecar.flush(time.time() + 60)
    rows = runtime.sidecar.store.stats(StatsQuery(until=time.time() + 60, by=("domain",))).rows
    return {row["domain"]: (row["drafted"], row["accepted"]) for row in rows}


def pools_view(runtime) -> dict[str, dict]:
    return {p["name"]: p for p in httpx.get(runtime.admin + "/pools").json()["pools"]}


def test_vllm_per_domain_acceptance_equals_the_sum_of_its_per_request_figures(engines, proxy):
    k3, off = VllmStandIn(3, seed=1), VllmStandIn(0, seed=2)
    url, runtime = proxy({"k3": engines(k3), "off": engines(off)}, policy="pool-ucb")
    jobs = []
    for i in range(36):
        stream = i % 2 == 1
        body = {"prompt": "p", "messages": [{"role": "user", "content": "p"}], "max_tokens": 8 + i % 13,
                "stream": stream, **({"stream_options": {"include_usage": True}} if stream else {})}
        jobs.append(("/v1/chat/completions" if i % 3 else "/v1/completions", body, DOMAINS[i % 3]))
    expected = run(url, jobs, vllm_figures)
    assert sum(d for d, _ in expected.values()) > 0 and k3.requests and off.requests  # both pools served
    assert stored(runtime, len(jobs)) == expected
    assert len(runtime.taken) == len(jobs)
    assert {r.pool: r.lookahead for r in runtime.taken} == {"k3": 3, "off": 0}
    # per-position acceptance from the answers' histograms: the engine's own per-position counts
    page = {f.name: f for f in text_string_to_metric_families(httpx.get(runtime.admin + "/metrics").text)}
    positions = {int(s.labels["position"]): s.value for s in page["specwatch_proxy_accepted_per_position"].samples
                 if s.name.endswith("_total") and s.labels["pool"] == "k3"}
    assert [positions.get(i, 0) for i in range(3)] == k3.per_position and sum(k3.per_position) > 0
    verified = [s.value for s in page["specwatch_proxy_verified_steps"].samples if s.name.endswith("_total")]
    assert verified == [k3.drafts]
    view = pools_view(runtime)
    assert (view["k3"]["engine"], view["k3"]["missing"], view["k3"]["records"]) == ("vllm", None, "per-request")
    assert view["k3"]["target_version"] == "meta-llama/Llama-3.1-8B-Instruct"


def test_vllm_records_carry_steps_time_and_the_engine_k(engines, proxy):
    engine = VllmStandIn(4, timing=True, seed=3)
    url, runtime = proxy({"k4": engines(engine)})
    answer = send(url, "/v1/completions", {"prompt": "p", "max_tokens": 20}, "code")
    spec = answer["metrics"]["speculative_decoding"]
    wait_for(lambda: runtime.taken)
    (r,) = runtime.taken
    assert (r.emitted, r.drafted, r.accepted) == (20, spec["num_draft_tokens"], spec["num_accepted_draft_tokens"])
    assert r.steps == 20 - spec["num_accepted_draft_tokens"] >= spec["num_spec_steps"]
    assert r.seconds == pytest.approx((85.2 + 1240.5) / 1000)


def test_vllm_without_the_flag_is_reported_once_and_recorded_per_pool(engines, proxy, caplog):
    engine = VllmStandIn(3, per_request=False, seed=4)
    url, runtime = proxy({"k3": engines(engine)})
    wait_for(lambda: pools_view(runtime)["k3"]["healthy"])
    with caplog.at_level(logging.WARNING, logger="specwatch.proxy"):
        for i in range(6):
            answer = httpx.post(url + "/v1/completions", json={"prompt": "p", "max_tokens": 12},
                                headers={"X-Specwatch-Domain": DOMAINS[i % 3]})
            assert answer.status_code == 200 and "speculative_decoding" not in answer.text  # served all the same
    lacks = [m for m in caplog.messages if "lack" in m]
    assert len(lacks) == 1 and "--per-request-spec-decode-metrics" in lacks[0]
    view = pools_view(runtime)["k3"]
    assert view["records"] == "pool-level" and "metrics.speculative_decoding" in view["missing"]
    # pool-level records: the engine's counter deltas from the first reading after the report, one domain
    counters = runtime.proxy.pools.by_name["k3"].counters
    wait_for(lambda: counters.first is not None)
    first = counters.first
    for _ in range(4):
        httpx.post(url + "/v1/completions", json={"prompt": "p", "max_tokens": 15},
                   headers={"X-Specwatch-Domain": "code"})
    assert engine.draft_tokens > first.draft_tokens
    wait_for(lambda: sum(r.drafted for r in runtime.taken) == engine.draft_tokens - first.draft_tokens, timeout=10)
    assert sum(r.accepted for r in runtime.taken) == engine.accepted - first.accepted
    assert sum(r.steps for r in runtime.taken) == engine.drafts - first.drafts
    assert {r.domain for r in runtime.taken} == {POOL_DOMAIN}
    assert {r.pool for r in runtime.taken} == {"k3"} and all(r.request_id is None for r in runtime.taken)


def test_vllm_streams_without_usage_are_served_and_reported_once(engines, proxy, caplog):
    engine = VllmStandIn(2, seed=5)
    url, runtime = proxy({"k2": engines(engine)})
    with caplog.at_level(logging.WARNING, logger="specwatch.proxy"):
        for _ in range(3):
            answer = httpx.post(url + "/v1/completions", json={"prompt": "p", "max_tokens": 6, "stream": True})
            assert answer.status_code == 200 and answer.text.endswith("data: [DONE]\n\n")
    assert len([m for m in caplog.messages if "lack" in m and "include_usage" in m]) == 1
    assert "usage" in pools_view(runtime)["k2"]["missing"]


ERRORS = [  # (stand-in, pool, path, streamed body)
    (lambda: VllmStandIn(3, seed=6), "k3", "/v1/completions",
     {"prompt": "p", "max_tokens": 8, "stream": True, "stream_options": {"include_usage": True}}),
    (lambda: SglangStandIn(2, seed=10), "k2", "/generate",
     {"text": "p", "sampling_params": {"max_new_tokens": 8}, "stream": True}),
    (lambda: TrtllmStandIn(0, seed=13), "off", "/v1/completions", None),
]


@pytest.mark.parametrize("make, pool, path, streamed", ERRORS, ids=["vllm", "sglang", "trtllm"])
def test_engine_errors_reach_the_client_unchanged_and_record_nothing(engines, proxy, make, pool, path, streamed):
    engine = make()
    url, runtime = proxy({pool: engines(engine)})
    engine.status = 400
    answer = httpx.post(url + path, json={"prompt": "p", "text": "p", "max_tokens": 4})
    assert (answer.status_code, answer.json()) == (400, engine.fx["error"])
    engine.status, engine.stream_error = None, True
    if streamed is not None:  # an error event ends the stream: the client gets it, nothing is recorded
        text = httpx.post(url + path, json=streamed).text
        assert '"error":{' in text and text.endswith("data: [DONE]\n\n")
    time.sleep(0.3)
    assert runtime.taken == [] and pools_view(runtime)[pool]["missing"] is None
    results = [s for s in text_string_to_metric_families(httpx.get(runtime.admin + "/metrics").text)
               if s.name == "specwatch_proxy_requests"]
    counted = {s.labels["result"]: s.value for s in results[0].samples if s.name.endswith("_total")}
    assert counted == {"engine_error": 1.0 if streamed is None else 2.0}


@pytest.mark.parametrize("legacy", [False, True])
def test_sglang_per_domain_acceptance_equals_the_sum_of_its_per_request_figures(engines, proxy, legacy):
    k3, off = SglangStandIn(3, legacy=legacy, seed=7), SglangStandIn(0, seed=8)
    url, runtime = proxy({"k3": engines(k3), "off": engines(off)})
    jobs = []
    for i in range(30):
        n = 6 + i % 11
        if i % 5 == 4:
            jobs.append(("/v1/chat/completions", {"messages": [{"role": "user", "content": "p"}], "max_tokens": n,
                                                  "return_meta_info": True}, DOMAINS[i % 3]))
        else:
            jobs.append(("/generate", {"text": "p", "sampling_params": {"max_new_tokens": n},
                                       "stream": i % 2 == 1}, DOMAINS[i % 3]))
    expected = run(url, jobs, sglang_figures)
    assert sum(d for d, _ in expected.values()) > 0
    assert stored(runtime, len(jobs)) == expected
    view = pools_view(runtime)
    assert (view["k3"]["engine"], view["k3"]["lookahead"]) == ("sglang", 3)
    assert view["k3"]["draft_version"] == "meta-llama/Llama-3.2-1B-Instruct"


def test_sglang_openai_answers_without_meta_info_are_reported_once(engines, proxy, caplog):
    engine = SglangStandIn(2, seed=9)
    url, runtime = proxy({"k2": engines(engine)})
    with caplog.at_level(logging.WARNING, logger="specwatch.proxy"):
        for _ in range(3):
            assert httpx.post(url + "/v1/chat/completions", json={"messages": [], "max_tokens": 5}).status_code == 200
    assert len([m for m in caplog.messages if "lack" in m and "return_meta_info" in m]) == 1
    assert pools_view(runtime)["k2"]["records"] == "none" and runtime.taken == []


def test_trtllm_pool_level_records_equal_its_counter_deltas_and_off_is_per_request(engines, proxy, caplog):
    k2, off = TrtllmStandIn(2, seed=11), TrtllmStandIn(0, seed=12)
    with caplog.at_level(logging.WARNING, logger="specwatch.proxy"):
        url, runtime = proxy({"k2": engines(k2), "off": engines(off)}, policy="pool-ucb")
        wait_for(lambda: all(p["healthy"] for p in pools_view(runtime).values()))
    view = pools_view(runtime)
    assert (view["k2"]["engine"], view["k2"]["records"]) == ("trtllm", "pool-level")  # known at start
    assert (view["off"]["records"], view["off"]["missing"]) == ("per-request", None)
    assert len([m for m in caplog.messages if "lack" in m]) == 1
    for i in range(12):
        assert send(url, "/v1/completions", {"prompt": "p", "max_tokens": 10 + i}, DOMAINS[i % 3])
    # pool-level records come with the health checks (a busy pool every fifth round): seconds on a busy machine
    wait_for(lambda: sum(r.drafted for r in runtime.taken if r.pool == "k2") == k2.draft_tokens, timeout=30)
    pooled = [r for r in runtime.taken if r.pool == "k2"]
    assert {r.domain for r in pooled} == {POOL_DOMAIN}
    assert sum(r.accepted for r in pooled) == k2.accepted and sum(r.steps for r in pooled) == k2.drafts
    plain = [r for r in runtime.taken if r.pool == "off"]
    assert sum(r.emitted for r in plain) == off.generated and {r.domain for r in plain} <= set(DOMAINS)

