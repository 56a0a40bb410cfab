"""Pools, health, versions and routing, with fake llama.cpp engines."""

from __future__ import annotations

import math
import time

import httpx

from agent.proxy.config import Upstream
from agent.proxy.pools import Pool, Pools
from agent.proxy.route import Router
from policies.switch import SwitchConfig
from storage.query import StatsQuery
from tests.proxy.fake_engine import FakeEngine
from tests.proxy.test_proxy import wait_for


def ask(url: str, domain: str, n: int = 4) -> str:
    answer = httpx.post(f"{url}/v1/completions", json={"prompt": "p", "max_tokens": n},
                        headers={"X-Specwatch-Domain": domain})
    assert answer.status_code == 200, answer.text
    return answer.headers["x-specwatch-pool"]


def test_a_domain_switched_off_sends_nothing_to_the_draft_pool(engines, proxy):
    draft, plain = FakeEngine(lookahead=4, accepted=3), FakeEngine()
    url, runtime = proxy({"k4": engines(draft), "off": engines(plain)}, policy="pool-ucb+switch")
    switch = runtime.sidecar.policy.switch
    switch.config = SwitchConfig(probe_fraction=0.0)  # no probes: off means off
    switch.warm_start("prose", [], on=False)
    served = [ask(url, "prose") for _ in range(20)]
    assert served == ["off"] * 20 and draft.requests == [] and len(plain.requests) == 20
    assert httpx.get(f"{runtime.admin}/decision", params={"domain": "prose"}).json()["pool"] == "off"


def test_a_pool_that_fails_leaves_rotation_and_comes_back(engines, proxy):
    k2, k4 = FakeEngine(lookahead=2, accepted=1), FakeEngine(lookahead=4, accepted=3)
    url, runtime = proxy({"k2": engines(k2), "k4": engines(k4)})
    assert runtime.proxy.router.restrictable.arms == (2, 4)
    k4.healthy = False
    wait_for(lambda: not runtime.proxy.pools.by_name["k4"].healthy)
    before = len(k4.requests)
    assert {ask(url, "code") for _ in range(10)} == {"k2"} and len(k4.requests) == before
    assert runtime.proxy.router.restrictable.arms == (2,)
    assert 'specwatch_proxy_pool_healthy{pool="k4"} 0.0' in httpx.get(f"{runtime.admin}/metrics").text
    k4.healthy = True
    wait_for(lambda: runtime.proxy.router.restrictable.arms == (2, 4))


def test_the_fallback_is_the_nearest_healthy_pool_serving_the_same_target():
    pools = Pools((Upstream("k2", "http://a:1"), Upstream("k4", "http://b:1"), Upstream("k5", "http://c:1"),
                   Upstream("off", "http://d:1")))
    for p, target, healthy in zip(pools.all, ("v1", "v1", "v2", "v1"), (True, False, True, True)):
        p.target_version, p.healthy = target, healthy
    router = Router.__new__(Router)
    router.pools = pools
    healthy = pools.healthy()
    assert router.pool_for(4, healthy).name == "k2"  # k5 is nearer but serves another target
    assert router.pool_for(5, healthy).name == "k5"
    assert router.pool_for(3, healthy).name == "k2"  # a probe's K that no pool has: the nearest


def test_versions_follow_the_engine_target_file(engines, proxy, tmp_path):
    v1, v2 = tmp_path / "target-v1.gguf", tmp_path / "target-v2.gguf"
    v1.write_bytes(b"GGUF v1 weights")
    v2.write_bytes(b"GGUF v2 weights")
    engine = FakeEngine(lookahead=2, accepted=1, model_path=str(v1))
    url, runtime = proxy({"k2": engines(engine)}, drafts={"k2": "draft@abc"})
    ask(url, "code")
    engine.model_path = str(v2)  # the target replaced behind the proxy
    wait_for(lambda: runtime.proxy.pools.by_name["k2"].target_version.startswith("target-v2.gguf@"))
    ask(url, "code")
    wait_for(lambda: len(runtime.taken) == 2)
    first, second = runtime.taken
    assert first.target_version.startswith("target-v1.gguf@") and len(first.target_version) == 15 + 12
    assert second.target_version.startswith("target-v2.gguf@") and first.draft_version == "draft@abc"


def test_an_adapter_applied_by_the_engine_is_another_target(engines, proxy, tmp_path):
    """llama.cpp serving the same base GGUF with a LoRA adapter (--lora) serves target v2: the version is the
    base's plus the adapter file's hash, and changes with the adapter's file and scale."""
    base, adapter = tmp_path / "target.gguf", tmp_path / "lora-v2.gguf"
    base.write_bytes(b"GGUF base weights")
    adapter.write_bytes(b"GGUF adapter A")
    engine = FakeEngine(model_path=str(base))
    engine.adapters = []
    url, runtime = proxy({"off": engines(engine)})
    pool = runtime.proxy.pools.by_name["off"]
    wait_for(lambda: pool.healthy)
    v1 = pool.target_version
    assert v1.startswith("target.gguf@") and "+" not in v1
    engine.adapters = [{"id": 0, "path": str(adapter), "scale": 1.0}]
    wait_for(lambda: pool.target_version != v1)
    v2 = pool.target_version
    assert v2.startswith(v1 + "+lora-v2.gguf@") and len(v2) == len(v1) + 1 + len("lora-v2.gguf@") + 12
    ask(url, "logs")
    wait_for(lambda: runtime.taken)
    assert runtime.taken[-1].target_version == v2
    adapter.write_bytes(b"GGUF adapter B, retrained")  # another adapter under the same name
    wait_for(lambda: pool.target_version not in (v1, v2))
    engine.adapters = [{"id": 0, "path": str(adapter), "scale": 0.5}]
    wait_for(lambda: pool.target_version.endswith("*0.5"))
    engine.adapters[0]["scale"] = 0.0  # switched off: the base model again
    wait_for(lambda: pool.target_version == v1)


def test_the_off_pool_records_carry_the_draft_of_the_pair(engines, proxy):
    url, runtime = proxy({"k2": engines(FakeEngine(lookahead=2, accepted=1)), "off": engines(FakeEngine())},
                         drafts={"k2": "draft@abc"})
    runtime.proxy.router.pool_for = lambda k, healthy: runtime.proxy.pools.by_name["off"]
    ask(url, "code")
    wait_for(lambda: runtime.taken)
    assert (runtime.taken[0].pool, runtime.taken[0].draft_version) == ("off", "draft@abc")


def test_one_pool_observes_only(engines, proxy):
    url, runtime = proxy({"k4": engines(FakeEngine(lookahead=4, accepted=2))})
    assert ask(url, "code") == "k4"
    decision = httpx.get(f"{runtime.admin}/decision", params={"domain": "code"}).json()
    assert decision["pool"] == "k4" and "observe" in decision["reason"]


def test_an_engine_reporting_its_draft_length_overrides_the_name(engines, proxy, caplog):
    engine = FakeEngine(lookahead=3, accepted=1)
    engine.props_extra = {"speculative.n_max": 3}
    url, runtime = proxy({"k4": engines(engine)})
    assert runtime.proxy.pools.by_name["k4"].lookahead == 3
    assert "reports draft length 3, not K=4" in caplog.text


def test_an_engine_reporting_a_longer_draft_than_the_name_records_at_the_engine_k(engines, proxy, caplog):
    # llama.cpp n-gram self-speculation (--spec-default) drafts up to 64 a step behind a pool named k8: its
    # records carry K=64 and are stored, where K=8 would refuse every request that drafted over 8 a step.
    engine = FakeEngine(lookahead=64, accepted=40)
    engine.props_extra = {"speculative.n_max": 64}
    url, runtime = proxy({"k8": engines(engine), "off": engines(FakeEngine())}, sidecar_options={"kmax": 64})
    assert runtime.proxy.pools.by_name["k8"].lookahead == 64 and runtime.proxy.router.restrictable.arms == (0, 64)
    assert "reports draft length 64, not K=8" in caplog.text
    runtime.proxy.router.pool_for = lambda k, healthy: runtime.proxy.pools.by_name["k8"]
    ask(url, "code", n=120)
    wait_for(lambda: runtime.taken)
    (record,) = runtime.taken
    assert (record.lookahead, record.drafted, record.pool) == (64, engine.drafted_total, "k8")
    assert record.drafted > 8 * record.steps
    runtime.sidecar.flush(math.inf)
    (row,) = runtime.sidecar.store.stats(StatsQuery(until=time.time() + 60, by=("lookahead",))).rows
    assert (row["lookahead"], row["drafted"], row["accepted"]) == (64, engine.drafted_total, engine.accepted_total)


def test_a_draft_length_over_64_records_at_64(engines, proxy, caplog):
    engine = FakeEngine(lookahead=2, accepted=1)
    engine.props_extra = {"speculative.n_max": 128}
    url, runtime = proxy({"k8": engines(engine)})
    assert runtime.proxy.pools.by_name["k8"].lookahead == 64 and "recording at K=64" in caplog.text


def test_a_new_domain_starts_on_the_default_pool_at_the_k_its_engine_reports(engines, proxy):
    ngram = FakeEngine(lookahead=64, accepted=20)
    ngram.props_extra = {"speculative.n_max": 64}  # named k8, drafting up to 64 a step
    pools = {"k8": engines(ngram), "k2": engines(FakeEngine(lookahead=2, accepted=1)), "off": engines(FakeEngine())}
    url, runtime = proxy(pools, policy="pool-cap+switch", sidecar_options={"kmax": 64}, default_pool="k8")
    assert runtime.sidecar.policy.policy.default == 64 and runtime.proxy.router.restrictable.arms == (0, 2, 64)
    assert [ask(url, f"new-{i}") for i in range(3)] == ["k8"] * 3  # no evidence in any of them: the default
    runtime.sidecar.ingest.drain(5.0)
    decision = runtime.sidecar.decide("never-seen")
    assert decision.lookahead == 64 and "default pool" in decision.reason


def test_no_healthy_pool_gives_503(engines, proxy):
    engine = FakeEngine()
    engine.healthy = False
    url, _ = proxy({"off": engines(engine)})
    answer = httpx.post(f"{url}/v1/completions", json={"prompt": "p"})
    assert answer.status_code == 503 and answer.json()["error"]["type"] == "no_upstream"


def test_decision_for_an_unseen_domain_creates_no_state(engines, proxy):
    url, runtime = proxy({"k2": engines(FakeEngine(lookahead=2, accepted=1)), "off": engines(FakeEngine())})
    answer = httpx.get(f"{runtime.admin}/decision", params={"domain": "new"}).json()
    assert answer["pool"] is None and "new" not in runtime.sidecar.state.slots


def test_pools_view(engines, proxy):
    _, runtime = proxy({"off": engines(FakeEngine())})
    (pool,) = httpx.get(f"{runtime.admin}/pools").json()["pools"]
    assert (pool["name"], pool["healthy"], pool["target_version"]) == ("off", True, "target.gguf")


def test_pool_draft_of_a_target():
    pools = Pools((Upstream("k2", "http://a:1"), Upstream("off", "http://b:1")))
    pools.all[0].target_version, pools.all[0].draft_version = "t", "d"
    assert pools.draft_of("t") == "d" and pools.draft_of("other") == "none"
    assert isinstance(pools.all[0], Pool)


def test_the_policy_learns_from_engine_seconds_and_routes_to_the_faster_pool(engines, proxy):
    fast, slow = FakeEngine(lookahead=4, accepted=4, ms_per_step=1.0), FakeEngine(ms_per_step=5.0)
    url, runtime = proxy({"k4": engines(fast), "off": engines(slow)})
    served = []
    for _ in range(30):
        served.append(ask(url, "code", n=16))
        runtime.sidecar.ingest.drain(5.0)  # the worker has fed the policy before the next decision
    assert served[-10:].count("k4") >= 9


def test_many_domains_share_bounded_state(engines, proxy):
    url, runtime = proxy({"k2": engines(FakeEngine(lookahead=2, accepted=1)), "off": engines(FakeEngine())},
                         max_domains=4)
    for i in range(40):
        ask(url, f"tenant-{i}", n=2)
    runtime.sidecar.ingest.drain(5.0)
    policy = runtime.proxy.router.restrictable
    slots = runtime.sidecar.state.slots
    assert len(slots) == 4 and all(d in slots or d == "other" for d in policy._domains)


def test_a_pool_named_kn_whose_engine_does_not_speculate_records_k0(engines, proxy, caplog):
    engine = FakeEngine()
    engine.speculative = False  # /slots: the engine was started without a draft
    url, runtime = proxy({"k4": engines(engine)})
    assert runtime.proxy.pools.by_name["k4"].lookahead == 0
    assert "reports no speculation, not K=4" in caplog.text
    ask(url, "code")
    wait_for(lambda: runtime.taken)
    assert runtime.taken[0].lookahead == 0


def test_a_draft_version_naming_a_file_is_that_file_content_hash(engines, proxy, tmp_path):
    draft = tmp_path / "draft.gguf"
    draft.write_bytes(b"GGUF draft weights")
    url, runtime = proxy({"k2": engines(FakeEngine(lookahead=2, accepted=1))}, drafts={"k2": str(draft)})
    version = runtime.proxy.pools.by_name["k2"].draft_version
    assert version.startswith("draft.gguf@") and len(version) == len("draft.gguf@") + 12


def test_a_pool_that_answers_is_checked_every_busy_rounds_and_an_idle_one_every_round():
    import asyncio

    from agent.proxy import pools as pools_module

    checked: list[str] = []

    class Counting(Pools):
        async def check(self, pool, client):
            checked.append(pool.name)
            pool.skipped, pool.healthy = 0, True
            return False

    pools = Counting((Upstream("k2", "http://a:1"), Upstream("off", "http://b:1")))
    for p in pools.all:
        p.healthy = True
    busy, idle = pools.by_name["k2"], pools.by_name["off"]
    rounds = 4 * pools_module.BUSY_ROUNDS
    for _ in range(rounds):
        busy.answered = True  # it answered a request since the last round
        asyncio.run(pools.check_all(None, pools_module.BUSY_ROUNDS))
    assert checked.count("off") == rounds
    assert checked.count("k2") == rounds // pools_module.BUSY_ROUNDS
    # a pool taken out of rotation by a failed request is checked at the next round, answered or not
    checked.clear()
    busy.answered, busy.healthy = True, False
    asyncio.run(pools.check_all(None, pools_module.BUSY_ROUNDS))
    assert "k2" in checked
    # busy_rounds=1 (the first check at start-up) checks every pool
    checked.clear()
    busy.answered = idle.answered = True
    asyncio.run(pools.check_all(None))
    assert sorted(checked) == ["k2", "off"]
