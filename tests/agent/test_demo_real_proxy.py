"""The real story's proxy side with fake llama.cpp engines (tests/proxy/fake_engine.py) in place of llama-server:
`specwatch proxy` as the child process agent/demo/real_proxy.py starts, replayed traffic through it, the adapter
switched on in both fakes (a new target version the proxy reads), the draft's acceptance collapsing on one
domain only: StaleDraft fires for that domain alone, naming both versions, and the switch moves it to ``off``
while the other keeps speculating. No alert while only the mix shifts. Seconds, no model."""

import time

from agent.demo.real_proxy import ProxyProcess, prompt_sets, send
from agent.demo.real_run import names_both
from agent.demo.real_story import moved_at
from agent.workload.mix import schedule
from tests.proxy.fake_engine import FakeEngine
from tests.proxy.servers import Running

ADAPTER = [{"id": 0, "path": "/models/lora-v2.gguf", "scale": 0.0}]


class DomainEngine(FakeEngine):
    """A fake accepting 2 of its K drafted tokens a step, none for ``logs`` requests once ``stale`` is set. The
    draft pool's step costs twice the plain one: at 2 of 3 accepted speculation pays, at none it loses."""

    stale = False

    async def complete(self, request):
        body = await request.json()
        logs = "log" in str(body.get("messages", "")).lower() and "{" in str(body.get("messages", ""))
        self.accepted = 0 if self.stale and logs else 2
        return await super().complete(_Again(request, body))


class _Again:
    """The request with its body already read (starlette reads a body once)."""

    def __init__(self, request, body):
        self._request, self._body = request, body
        self.url, self.headers = request.url, request.headers

    async def json(self):
        return self._body


def test_stale_draft_fires_for_the_changed_domain_only_and_names_both_versions(tmp_path):
    off, k3 = DomainEngine(lookahead=0, ms_per_step=1.0), DomainEngine(lookahead=3, ms_per_step=2.0)
    for engine in (off, k3):
        engine.adapters = [dict(a) for a in ADAPTER]
    with Running(off.app) as a, Running(k3.app) as b:
        proxy = ProxyProcess({"off": a.url, "k3": b.url}, f"sqlite:///{tmp_path / 'p.db'}", tmp_path / "proxy.log",
                             options=("--draft-version", "k3=draft-v1"), sample=8, policy="fixed:3+switch")
        try:
            proxy.wait_ready(2)
            v1 = {p["name"]: p["target_version"] for p in proxy.pools()}
            sets = prompt_sets(("chat", "logs"))
            before = send(proxy.url, schedule("chat=3,logs=1", ["2s:chat=1,logs=3"]), sets, 4.0, tokens=32)
            assert not proxy.alerts()  # the mix shifted, nothing else: no alert
            pools = [r.pool for r in before.results]
            assert pools.count("k3") > 0.8 * len(pools)  # the switch measures off now and then
            assert set(proxy.sample()) == {"chat", "logs"}

            for engine in (off, k3):
                engine.adapters[0]["scale"] = 1.0
            off.stale = k3.stale = True
            updated = time.time()
            proxy.wait_pools(lambda ps: all("+" in p["target_version"] for p in ps.values()), "target v2")
            v2 = {p["name"]: p["target_version"] for p in proxy.pools()}
            after = send(proxy.url, schedule("chat=1,logs=1"), sets, 6.0, tokens=32, seed=1)
            time.sleep(2.5)  # the proxy's next alert evaluation (every second)
            proxy_alerts = proxy.alerts()
            stale = [x for x in proxy_alerts if x["labels"]["alertname"] == "StaleDraft"]
        finally:
            proxy.stop()
    assert [x["labels"]["domain"] for x in stale] == ["logs"]
    assert stale[0]["starts_at"] >= updated
    assert names_both(stale[0], v1, v2)
    moved = moved_at([r.__dict__ for r in before.results], [r.__dict__ for r in after.results], "logs")
    assert moved is not None and moved["from"] == "k3" and moved["to"] == "off"
    chat = [r for r in after.results if r.domain == "chat"]
    assert chat[-1].pool == "k3" and chat[-1].drafted > 0
