"""`specwatch replay` through the proxy in front of two fake llama.cpp pools: the proxy takes every request's
domain from the driver's header, and what it records per domain is what the driver sent and counted."""

from __future__ import annotations

from collections import Counter

from agent.workload import tally
from agent.workload.mix import schedule
from agent.workload.replay import ReplayConfig, replay
from agent.workload.requests import Sampling
from tests.proxy.fake_engine import FakeEngine
from tests.proxy.test_proxy import wait_for


def test_the_proxy_records_each_replayed_request_under_its_domain(engines, proxy):
    k4, off = FakeEngine(lookahead=4, accepted=3), FakeEngine()
    url, runtime = proxy({"k4": engines(k4), "off": engines(off)})
    run = replay(ReplayConfig(url, schedule("edit=2,chat=1", ["0.2s:json=1"]), concurrency=3, requests=30,
                              sampling=Sampling(max_tokens=8)))  # the fake engine's usage says 8 tokens
    assert [r.error for r in run.results] == [None] * 30
    assert {r.pool for r in run.results} <= {"k4", "off"}
    assert len(k4.requests) + len(off.requests) == 30
    wait_for(lambda: len(runtime.taken) == 30)
    sent = Counter(r.domain for r in run.results)
    assert Counter(r.domain for r in runtime.taken) == sent and len(sent) >= 2
    tokens = {row["domain"]: row["tokens"] for row in tally.summary(run)}
    assert {d: sum(r.emitted for r in runtime.taken if r.domain == d) for d in sent} == {d: tokens[d] for d in sent}
