"""Per-domain figures stored equal the sums of each engine's per-request figures exactly: every engine stand-in
(tests/proxy/standins.py), plain and streamed, eight requests at a time, through a speculating pool and a pool
without a draft. Expected sums come from what the client read in each answer (the pool that served it named
by ``x-specwatch-pool``); stored ones from the store. Every domain's expected steps, and the drafted and
accepted tokens of the engines that report them, are above zero, so a figure the adapter dropped or counted
twice changes a sum and fails the test."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from storage.query import StatsQuery
from tests.proxy.standins import SglangStandIn, TrtllmStandIn, VllmStandIn
from tests.proxy.test_proxy import wait_for

DOMAINS = ("code", "prose", "chat")
JOBS = 24


def vllm_job(i: int, streamed: bool) -> tuple[str, dict]:
    body = {"prompt": "p", "messages": [{"role": "user", "content": "p"}], "max_tokens": 8 + i % 11,
            "stream": streamed, **({"stream_options": {"include_usage": True}} if streamed else {})}
    return ("/v1/chat/completions" if i % 2 else "/v1/completions"), body


def vllm_read(answer: dict) -> tuple[int, int, int]:
    spec = (answer.get("metrics") or {}).get("speculative_decoding") or {}
    return spec.get("num_draft_tokens", 0), spec.get("num_accepted_draft_tokens", 0), answer["usage"]["completion_tokens"]


def sglang_job(i: int, streamed: bool) -> tuple[str, dict]:
    n = 8 + i % 11
    if not streamed and i % 3 == 2:  # its OpenAI route, asking for meta_info
        return "/v1/chat/completions", {"messages": [{"role": "user", "content": "p"}], "max_tokens": n,
                                        "return_meta_info": True}
    return "/generate", {"text": "p", "sampling_params": {"max_new_tokens": n}, "stream": streamed}


def sglang_read(answer: dict) -> tuple[int, int, int]:
    meta = answer.get("meta_info") or answer["choices"][0]["meta_info"]
    return (meta.get("spec_num_proposed_drafts", 0), meta.get("spec_num_correct_drafts", 0),
            meta["completion_tokens"])


def trtllm_job(i: int, streamed: bool) -> tuple[str, dict]:
    return "/v1/completions", {"prompt": "p", "max_tokens": 8 + i % 11, "stream": streamed,
                               **({"stream_options": {"include_usage": True}} if streamed else {})}


def trtllm_read(answer: dict) -> tuple[int, int, int]:
    return 0, 0, answer["usage"]["completion_tokens"]  # no per-request counts: its k pool is pool-level


ENGINES = {  # name: (speculating stand-in, plain stand-in, job, what the client reads, k pool per request)
    "vllm": (lambda: VllmStandIn(3, seed=21), lambda: VllmStandIn(0, seed=22), vllm_job, vllm_read, True),
    "sglang": (lambda: SglangStandIn(3, seed=23), lambda: SglangStandIn(0, seed=24), sglang_job, sglang_read, True),
    "trtllm": (lambda: TrtllmStandIn(2, seed=25), lambda: TrtllmStandIn(0, seed=26), trtllm_job, trtllm_read,
               False),
}


def send(url: str, path: str, body: dict, domain: str) -> tuple[str, dict]:
    """One request: the pool that served it and the answer (streamed: its last event) as the client read it."""
    answer = httpx.post(url + path, json=body, headers={"X-Specwatch-Domain": domain}, timeout=30)
    assert answer.status_code == 200, answer.text
    if body.get("stream"):
        events = [json.loads(line[6:]) for line in answer.text.splitlines() if line.startswith("data: {")]
        return answer.headers["x-specwatch-pool"], events[-1]
    return answer.headers["x-specwatch-pool"], answer.json()


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("name", list(ENGINES))
def test_per_domain_figures_stored_equal_the_sum_of_the_engine_per_request_figures(engines, proxy, name,
                                                                                    streamed):
    make_k, make_off, job, read, k_per_request = ENGINES[name]
    k, off = make_k(), make_off()
    k_name = f"k{k.lookahead}"
    url, runtime = proxy({k_name: engines(k), "off": engines(off)}, policy="pool-ucb")
    wait_for(lambda: all(p.healthy for p in runtime.proxy.pools.all))
    jobs = [(*job(i, streamed), DOMAINS[i % 3]) for i in range(JOBS)]
    with ThreadPoolExecutor(8) as threads:
        answers = list(threads.map(lambda j: (j[2], *send(url, *j)), jobs))
    expected: dict[str, tuple[int, int, int]] = {}
    per_request = [(d, pool, a) for d, pool, a in answers if pool == "off" or k_per_request]
    for domain, _, answer in per_request:
        drafted, accepted, emitted = read(answer)
        was = expected.get(domain, (0, 0, 0))
        expected[domain] = (was[0] + drafted, was[1] + accepted, was[2] + emitted - accepted)  # steps
    assert {pool for _, pool, _ in answers} == {k_name, "off"}  # both pools served
    assert set(expected) == set(DOMAINS) and all(steps > 0 for _, _, steps in expected.values())
    if k_per_request:
        assert sum(d for d, _, _ in expected.values()) > 0 and sum(a for _, a, _ in expected.values()) > 0
    wait_for(lambda: len([r for r in runtime.taken if r.domain in DOMAINS]) >= len(per_request))
    runtime.sidecar.flush(time.time() + 60)
    rows = runtime.sidecar.store.stats(StatsQuery(until=time.time() + 60, by=("domain",))).rows
    stored = {row["domain"]: (row["drafted"], row["accepted"], row["steps"]) for row in rows
              if row["domain"] in DOMAINS}
    assert stored == expected
    assert len([r for r in runtime.taken if r.domain in DOMAINS]) == len(per_request)  # one record a request
