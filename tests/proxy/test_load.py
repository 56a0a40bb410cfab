"""The load each request meets, as the proxy records it and hands it to the policy: the requests in flight on
its pool over its life, it included (``--shared-load``: on every pool)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from agent.proxy.inflight import InFlight
from agent.proxy.route import loads
from tests.proxy.fake_engine import FakeEngine


def send(url: str, n: int) -> None:
    def one(i: int) -> int:
        return httpx.post(f"{url}/v1/completions", json={"prompt": f"p{i}", "n_predict": 8},
                          headers={"X-Specwatch-Domain": "chat"}, timeout=30).status_code
    with ThreadPoolExecutor(n) as pool:
        assert set(pool.map(one, range(n))) == {200}


@pytest.mark.parametrize("shared", [False, True])
def test_requests_in_flight_together_record_the_load_they_met(engines, proxy, shared):
    slow, other = FakeEngine(lookahead=2, accepted=1), FakeEngine()
    slow.delay = other.delay = 0.5  # four requests sent at once are all in flight together
    url, runtime = proxy({"k2": engines(slow), "off": engines(other)}, policy="pool-cap", shared_load=shared)
    send(url, 4)
    got = sorted(r.load for r in runtime.taken)
    assert len(got) == 4 and got[0] >= 1
    by_pool = {}
    for r in runtime.taken:
        by_pool.setdefault(r.pool, []).append(r.load)
    if shared:  # every request decoded beside all four, whichever pool it went to: the first sent too
        assert got[0] >= 3 and got[-1] == 4, got
    else:  # each pool's own: the largest a pool saw is at most what was sent to it
        assert all(max(v) <= len(v) for v in by_pool.values()) and max(got) == max(len(v) for v in by_pool.values())
    assert all(p.inflight == 0 for p in runtime.proxy.pools.all)  # every request's count was taken back


def test_a_policy_is_asked_with_each_pools_load():
    class P:
        def __init__(self, lookahead, inflight, meter=None):
            self.lookahead, self.meter = lookahead, meter or InFlight()
            for _ in range(inflight):
                self.meter.enter()

        @property
        def inflight(self):
            return self.meter.count

    pools = [P(0, 3), P(8, 0), P(8, 1)]
    assert loads(pools) == {0: 4, 8: 1}  # the idlest pool of a K
    everyone = InFlight()
    for _ in range(4):
        everyone.enter()
    assert loads(pools, everyone) == {0: 5, 8: 5}
    now = [0.0]
    burst = InFlight(lambda: now[0])  # a pool that ran six requests together, idle now
    mets = [burst.enter() for _ in range(6)]
    now[0] += 4.0
    for met in mets:
        burst.leave(met)
    assert burst.ahead() == 6
    assert loads([P(0, 3), P(8, 0, burst)]) == {0: 4, 8: 1}  # a pool of its own: idle now is idle
    assert loads([P(0, 3), P(8, 0)], burst) == {0: 6, 8: 6}  # a shared machine: the burst comes back
