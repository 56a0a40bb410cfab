"""The start check (agent/proxy/startcheck.py) against each engine stand-in: whether a pool's answers will carry
their per-request figures is known when the pool comes up, reported once per pool in the log and in /pools,
never again per request, and every request is served."""

from __future__ import annotations

import logging

import httpx
import pytest

from agent.proxy.engines.pool_level import POOL_DOMAIN
from tests.proxy.standins import SglangStandIn, TrtllmStandIn, VllmStandIn
from tests.proxy.test_proxy import wait_for

VLLM = ("/v1/completions", {"prompt": "p", "max_tokens": 9})
SGLANG = ("/generate", {"text": "p", "sampling_params": {"max_new_tokens": 9}})

CASES = [  # id, stand-in, pool, request, (records, what /pools says is missing, start requests the engine got)
    ("vllm-flag-on", lambda: VllmStandIn(3, seed=31), "k3", VLLM, ("per-request", None, ["probe"])),
    ("vllm-flag-off", lambda: VllmStandIn(3, per_request=False, seed=32), "k3", VLLM,
     ("pool-level", "metrics.speculative_decoding", ["probe"])),
    ("vllm-dev-mode-on", lambda: VllmStandIn(3, dev_mode=True, seed=33), "k3", VLLM,
     ("per-request", None, ["/server_info"])),
    ("vllm-dev-mode-off", lambda: VllmStandIn(3, per_request=False, dev_mode=True, seed=34), "k3", VLLM,
     ("pool-level", "metrics.speculative_decoding", ["/server_info"])),
    ("vllm-no-draft", lambda: VllmStandIn(0, seed=35), "off", VLLM, ("per-request", None, [])),
    ("sglang", lambda: SglangStandIn(3, seed=36), "k3", SGLANG, ("per-request", None, [])),
    ("sglang-no-draft", lambda: SglangStandIn(0, seed=37), "off", SGLANG, ("per-request", None, [])),
    ("trtllm", lambda: TrtllmStandIn(2, seed=38), "k2", VLLM, ("pool-level", "per-request speculation counts", [])),
    ("trtllm-no-draft", lambda: TrtllmStandIn(0, seed=39), "off", VLLM, ("per-request", None, [])),
]


def started(runtime) -> dict:
    """/pools once every pool is up and its start check has ended."""
    pools = runtime.proxy.pools.all
    wait_for(lambda: all(p.healthy and (p.starting is None or p.starting.done()) for p in pools), timeout=10)
    return {p["name"]: p for p in httpx.get(runtime.admin + "/pools").json()["pools"]}


def reports(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and " lack " in r.getMessage()]


def asked(engine) -> list[str]:
    """What the engine was asked before any client request: the probe (a 1-token completion) or the page."""
    return [r["path"] if "path" in r else "probe" if r.get("max_tokens") == 1 else "other" for r in engine.requests]


@pytest.mark.parametrize("make, pool, call, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_engine_is_known_at_start_and_reported_once_not_per_request(engines, proxy, caplog, make, pool,
                                                                         call, expected):
    records, missing, start_requests = expected
    engine = make()
    with caplog.at_level(logging.WARNING, logger="specwatch.proxy"):
        url, runtime = proxy({pool: engines(engine)})
        view = started(runtime)[pool]
        # known before any request was sent
        assert (view["records"], asked(engine), runtime.taken) == (records, start_requests, [])
        assert view["missing"] is None if missing is None else missing in view["missing"]
        assert len(reports(caplog)) == (0 if missing is None else 1)
        for _ in range(5):
            path, body = call
            answer = httpx.post(url + path, json=body, headers={"X-Specwatch-Domain": "code"})
            assert answer.status_code == 200  # served whatever is missing
    assert len(reports(caplog)) == (0 if missing is None else 1)  # once per pool, not once per request
    assert started(runtime)[pool]["records"] == records
    per_request = [r for r in runtime.taken if r.domain == "code"]
    assert len(per_request) == (5 if records == "per-request" else 0)


def test_a_field_a_client_leaves_out_is_reported_once_and_the_pool_stays_per_request(engines, proxy, caplog):
    """Streams without include_usage on a pool whose flag is on: reported once, those requests unrecorded, the
    others recorded per request, and the pool's counters never read on top of them (no double count)."""
    engine = VllmStandIn(3, seed=40)
    with caplog.at_level(logging.WARNING, logger="specwatch.proxy"):
        url, runtime = proxy({"k3": engines(engine)})
        started(runtime)
        for i in range(8):
            body = {"prompt": "p", "max_tokens": 10, "stream": i % 2 == 1}
            assert httpx.post(url + "/v1/completions", json=body).status_code == 200
    assert [m for m in reports(caplog) if "usage" in m] == reports(caplog) and len(reports(caplog)) == 1
    view = started(runtime)["k3"]
    assert (view["records"], "usage" in view["missing"]) == ("per-request", True)
    wait_for(lambda: len(runtime.taken) == 4)
    assert runtime.proxy.pools.by_name["k3"].counters is None
    assert all(r.domain != POOL_DOMAIN for r in runtime.taken)
