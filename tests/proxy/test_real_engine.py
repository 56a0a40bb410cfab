"""The proxy in front of real llama-server processes (llama.cpp b11434) serving the tiny kit's GGUF models:
pool k4 (target v1 + draft, --spec-draft-n-max 4) and pool off (target v1 alone), one thread each.
Skipped only when llama.cpp is not installed (`make engine`; CI installs it)."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import time

import httpx
import pytest

from agent.engines.llamacpp import LlamaServer, LlamaServerConfig, LlamaServerError, find_binary
from agent.kit import layout
from agent.proxy.config import ProxyConfig, Upstream
from agent.proxy.run import build, server_options
from agent.runtime.config import SidecarConfig
from policies.switch import SwitchConfig
from storage.query import StatsQuery
from tests.engines.conftest import kit_home, tiny_gguf  # noqa: F401 (session fixtures: the tiny kit as GGUF)
from tests.proxy.servers import Running
from tests.proxy.test_proxy import wait_for

try:
    find_binary()
except LlamaServerError as exc:
    pytest.skip(f"llama-server not installed ({exc})", allow_module_level=True)

CTX = 256
N = 32  # tokens per request: prompts of up to 128 bytes fit the tiny kit's 160 positions
DRAFTED = "llamacpp:spec_decode_num_draft_tokens_total"
ACCEPTED = "llamacpp:spec_decode_num_accepted_tokens_total"
PREDICTED = "llamacpp:tokens_predicted_total"


def serve(model, tmp, port: int = 0, **kwargs) -> LlamaServer:
    return LlamaServer(LlamaServerConfig(model=model, ctx_size=CTX, threads=1, port=port, **kwargs),
                       log_path=tmp / f"llama-{model.stem}-{kwargs.get('lookahead', 0)}.log").start()


@pytest.fixture(scope="module")
def kit(tiny_gguf, kit_home, tmp_path_factory):  # noqa: F811
    prompts = layout.load_prompts(layout.kit_dir("tiny", kit_home))
    return {"paths": {name: item.path for name, item in tiny_gguf.items()},
            "prompts": {d: [t[:100] for t in texts[:6]] for d, texts in prompts.items()},
            "tmp": tmp_path_factory.mktemp("real")}


@pytest.fixture(scope="module")
def pools(kit):
    paths, tmp = kit["paths"], kit["tmp"]
    servers = {"k4": serve(paths["target-v1"], tmp, draft=paths["draft"], lookahead=4),
               "off": serve(paths["target-v1"], tmp)}
    yield servers
    for s in servers.values():
        s.stop()


@contextlib.contextmanager
def proxy_in_front(pools, tmp, **options):
    tmp.mkdir(exist_ok=True)
    sidecar = SidecarConfig(db=f"sqlite:///{tmp / 'proxy.db'}", pod="real", policy="pool-ucb+switch", seed=3)
    upstreams = tuple(Upstream(name, s.base_url) for name, s in pools.items())
    options = {"health_seconds": 0.2, "read_seconds": 60.0, **options}
    runtime = build(ProxyConfig(upstreams, sidecar=sidecar, port=0, admin_port=0, **options))
    try:
        listeners = runtime.listen()
        # As `specwatch proxy` serves it.
        with Running(runtime.app, sockets=listeners.sockets, **server_options(runtime.config)) as running:
            yield running.url, runtime
    finally:
        runtime.sidecar.close()


@pytest.fixture(scope="module")
def front(pools, kit):
    with proxy_in_front(pools, kit["tmp"]) as found:
        yield found


def counters(server: LlamaServer) -> dict[str, float]:
    text = httpx.get(server.base_url + "/metrics").text
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(llamacpp:\w+) ([0-9.e+]+)$", text, re.M)}


def complete(url: str, domain: str, prompt: str, **extra) -> httpx.Response:
    body = {"prompt": prompt, "max_tokens": N, "temperature": 0.0, "cache_prompt": False, **extra}
    return httpx.post(url + "/v1/completions", json=body, headers={"X-Specwatch-Domain": domain}, timeout=60)


def stats(store) -> dict[str, dict]:
    """Per-domain rows of the query `specwatch stats --by domain` runs (its table shows the ratios; the rows
    carry the drafted and accepted sums), the still-open windows included."""
    return {row["domain"]: row for row in store.stats(StatsQuery(until=time.time() + 60, by=("domain",))).rows}


def test_per_domain_drafted_and_accepted_equal_llama_cpp_own_counters(pools, front, kit):
    url, runtime = front
    expected = {}
    for domain in ("code", "prose"):
        before = {name: counters(s) for name, s in pools.items()}
        for prompt in kit["prompts"][domain]:
            assert complete(url, domain, prompt).status_code == 200
        after = {name: counters(s) for name, s in pools.items()}
        expected[domain] = tuple(round(sum(after[p].get(c, 0) - before[p].get(c, 0) for p in pools))
                                 for c in (DRAFTED, ACCEPTED))
    assert expected["code"][0] > 0 or expected["prose"][0] > 0  # something was drafted
    runtime.sidecar.flush(time.time() + 60)  # the open windows too
    rows = stats(runtime.sidecar.store)
    assert {d: (rows[d]["drafted"], rows[d]["accepted"]) for d in expected} == expected


def test_streamed_output_is_byte_identical_to_a_direct_call(pools, front, kit):
    url, _ = front
    body = {"prompt": kit["prompts"]["code"][0], "max_tokens": N, "temperature": 0.0, "cache_prompt": False,
            "stream": True}
    through = httpx.post(url + "/v1/completions", json=body, headers={"X-Specwatch-Domain": "code"}, timeout=60)
    direct = httpx.post(pools[through.headers["x-specwatch-pool"]].base_url + "/v1/completions", json=body,
                        timeout=60)
    assert through.status_code == direct.status_code == 200
    assert normalise(through.content) == normalise(direct.content)
    assert through.content.count(b"data: ") == direct.content.count(b"data: ") > N // 2


def normalise(stream: bytes) -> bytes:
    """Blank what llama.cpp makes anew on every call: the completion id, the created time and timings'
    measured times and rates."""
    stream = re.sub(rb'"id":"[^"]*"', b'"id":""', stream)
    stream = re.sub(rb'"created":\d+', b'"created":0', stream)
    return re.sub(rb'"(\w+_ms|\w+_per_second|\w+_per_token_ms)":[-0-9.e+]+', rb'"\1":0', stream)


def test_a_domain_switched_off_sends_no_request_to_the_draft_pool(pools, front, kit):
    url, runtime = front
    runtime.sidecar.policy.switch.config = SwitchConfig(probe_fraction=0.0)
    # Switched off earlier (a stored transition), as a restarted proxy finds it: only domains with state
    # carry a switch; an unknown one gets the default decision.
    runtime.sidecar.store.record_transition("logs", False, "speculation does not pay")
    assert "logs" in runtime.sidecar.warm_start()
    before = counters(pools["k4"])[PREDICTED]
    for prompt in kit["prompts"]["logs"]:
        answer = complete(url, "logs", prompt)
        assert answer.status_code == 200 and answer.headers["x-specwatch-pool"] == "off"
    assert counters(pools["k4"])[PREDICTED] == before


def test_timeouts_give_504_naming_the_pool(pools, kit):
    with proxy_in_front({"k4": pools["k4"]}, kit["tmp"] / "slow", read_seconds=0.001) as (url, _):
        # ignore_eos: the tiny model may end at once, answering within the timeout (seen: 1 run in 3). On a
        # loaded machine the proxy's event loop can also get the whole answer and the timer in one wake-up,
        # and the answer wins: ask up to 5 times; without a timeout every answer would be a 200.
        for _ in range(5):
            answer = complete(url, "code", kit["prompts"]["code"][0], max_tokens=400, ignore_eos=True)
            if answer.status_code != 200:
                break
    assert answer.status_code == 504 and answer.json()["error"]["pool"] == "k4"


def test_a_killed_pool_fails_over_at_once_then_its_domains_fall_back(pools, front, kit):
    url, runtime = front
    with proxy_in_front(pools, kit["tmp"] / "late", health_seconds=600.0) as (late_url, late):
        k4, pool_for = late.proxy.pools.by_name["k4"], late.proxy.router.pool_for
        # Its one check at start (2 s) may time out while an engine finishes the previous test's long answer
        # (/slots waits for it); the front proxy, checking every 0.2 s, sees both servers up.
        for name, pool in late.proxy.pools.by_name.items():
            wait_for(lambda: runtime.proxy.pools.by_name[name].healthy, timeout=30)
            wait_for(lambda: pool.checked is not None, timeout=30)  # a check still running would undo the next line
            pool.healthy = True
        late.proxy.router.pool_for = lambda k, healthy: k4 if k4 in healthy else pool_for(k, healthy)
        port = pools["k4"].port
        pools["k4"].stop()
        answer = complete(late_url, "code", kit["prompts"]["code"][0])
        # Refused by the dead server, sent on to the other pool; out of rotation at once, not at the next
        # health check (600 s away).
        assert answer.status_code == 200 and answer.headers["x-specwatch-pool"] == "off"
        assert not k4.healthy and "could not reach" in k4.error
        assert complete(late_url, "code", kit["prompts"]["code"][1]).headers["x-specwatch-pool"] == "off"
    wait_for(lambda: not runtime.proxy.pools.by_name["k4"].healthy)
    served = {complete(url, "code", p).headers["x-specwatch-pool"] for p in kit["prompts"]["code"][:3]}
    assert served == {"off"}
    paths = kit["paths"]
    pools["k4"] = serve(paths["target-v1"], kit["tmp"], port=port, draft=paths["draft"], lookahead=4)
    wait_for(lambda: runtime.proxy.pools.by_name["k4"].healthy, timeout=10)


def restart(pools, name: str, model, kit) -> None:
    port = pools[name].port
    pools[name].stop()
    pools[name] = serve(model, kit["tmp"], port=port, draft=kit["paths"]["draft"], lookahead=4)


def test_a_target_swapped_behind_the_proxy_fires_stale_draft_naming_both_versions(pools, front, kit):
    """v1 is a target the draft matches well (a copy of the draft itself: acceptance near 1; the tiny kit's
    own v1 -> v2 moves acceptance only from about 0.19 to 0.14), v2 the kit's target: the draft is stale."""
    url, runtime = front
    k4 = runtime.proxy.pools.by_name["k4"]
    runtime.proxy.router.pool_for = lambda k, healthy: k4  # every request drafts: the watch needs drafted tokens
    matched = kit["tmp"] / "target-matched.gguf"
    shutil.copy(kit["paths"]["draft"], matched)
    restart(pools, "k4", matched, kit)
    wait_for(lambda: k4.healthy and (k4.target_version or "").startswith("target-matched.gguf@"), timeout=10)
    old = k4.target_version
    prompts = [p for texts in kit["prompts"].values() for p in texts]
    for prompt in prompts * 2:
        complete(url, "mixed", prompt)
    restart(pools, "k4", kit["paths"]["target-v2"], kit)
    wait_for(lambda: k4.healthy and k4.target_version != old, timeout=10)
    new = k4.target_version
    assert new.startswith("target-v2") and "@" in new
    fired = []
    for i in range(100):
        complete(url, "mixed", prompts[i % len(prompts)])
        if i % 5 == 4:
            runtime.sidecar.flush()
            runtime.sidecar.tick_alerts()
            fired = [a for a in runtime.sidecar.alerts.alerts("firing") if a.labels["alertname"] == "StaleDraft"]
            if fired:
                break
    assert fired, "StaleDraft did not fire"
    notes = fired[0].annotations
    assert old in notes.values() and new in notes.values(), notes


def test_the_engines_headers_reach_the_client_once(front, kit):
    url, _ = front
    answer = complete(url, "code", kit["prompts"]["code"][0])
    assert answer.status_code == 200 and answer.headers.get_list("server") == ["llama.cpp"]
