"""`specwatch demo --real`'s control logic over a fake world (agent/demo/real_run.py), and the pure functions it
reads its requests with (agent/demo/real_story.py). The real world runs in tests/engines/test_demo_real_engine.py."""

import pytest

from agent.demo.real_run import PHASES, RealDemo, RealPlan, names_both
from agent.demo.real_story import moved_at, phase_rows

V1 = {"off": "t.gguf@aa", "k3": "t.gguf@aa"}
V2 = {"off": "t.gguf@aa+lora.gguf@bb", "k3": "t.gguf@aa+lora.gguf@bb"}


def result(domain, pool, started, drafted=10, accepted=5, tokens=20, seconds=1.0, error=None):
    return {"domain": domain, "pool": pool, "started": started, "drafted": drafted, "accepted": accepted,
            "tokens": tokens, "seconds": seconds, "error": error}


def stale_alert(at, old=V1["k3"], new=V2["k3"], domain="logs"):
    return {"labels": {"alertname": "StaleDraft", "domain": domain}, "state": "firing", "starts_at": at,
            "annotations": {"summary": f"Draft d is stale for target {new} in {domain}",
                            "old_target_version": old, "new_target_version": new}}


class FakeWorld:
    """Logs on k3 under v1; after the update the proxy moves logs to ``off`` from the ``move_after``-th chunk and
    StaleDraft fires after ``fire_after`` chunks (never when None); after re-distillation logs goes back to k3
    from the ``back_after``-th chunk of phase 3."""

    def __init__(self, fire_after=1, move_after=2, back_after=1):
        self.fire_after, self.move_after, self.back_after = fire_after, move_after, back_after
        self.calls: list[str] = []
        self.chunks = {0: 0, 1: 0, 2: 0}
        self.updated = None
        self.clock = 1000.0

    def traffic(self, phase, seconds):
        self.calls.append(f"traffic {phase} {seconds:g}")
        self.chunks[phase] += 1
        n = self.chunks[phase]
        if phase == 0:
            pool = "k3"
        elif phase == 1:
            pool = "off" if n >= self.move_after else "k3"
        else:
            pool = "k3" if n >= self.back_after else "off"
        self.clock += seconds
        return [result("logs", pool, 0.5 * i, accepted=1 if phase == 1 else 6) for i in range(3)] + \
            [result("chat", "k8", 0.2)]

    def update(self):
        self.calls.append("update")
        self.updated = self.clock
        return self.clock

    def alerts(self):
        fired = self.fire_after is not None and self.chunks[1] >= self.fire_after
        return [stale_alert(self.updated + 7.5)] if fired else []

    def versions(self):
        return V2 if self.updated is not None else V1

    def guard(self):
        self.calls.append("guard")
        return {"failed": ["logs"], "title": "t", "rows": []}

    def redistill(self, domain):
        self.calls.append(f"redistill {domain}")
        return {"steps": 3, "total_seconds": 1.0}


def test_the_story_in_order_and_phase_two_ends_once_stale_and_moved():
    world = FakeWorld(fire_after=1, move_after=2)
    out = RealDemo(RealPlan(phase1=30, phase2=60, phase3=60, chunk=10), world).run()
    assert world.calls == ["traffic 0 30", "guard", "update", "traffic 1 10", "traffic 1 10", "redistill logs",
                           "traffic 2 10"]
    assert out.stale == {"domain": "logs", "delay": 7.5, "summary": "Draft d is stale for target "
                         f"{V2['k3']} in logs", "names_both": True}
    assert out.moved["from"] == "k3" and out.moved["to"] == "off"
    assert out.back is True
    assert out.guard["failed"] == ["logs"]
    rows = {(r["phase"], r["domain"]): r for r in out.rows}
    assert rows[(PHASES[1], "logs")]["requests"] == 6
    assert rows[(PHASES[1], "logs")]["pool_counts"] == {"k3": 3, "off": 3}
    assert set(out.stages) >= {"phase 1", "guard", "phase 2", "re-distillation", "phase 3"}


def test_without_stale_draft_phase_two_runs_its_whole_time_and_says_so():
    world = FakeWorld(fire_after=None, move_after=99, back_after=99)
    out = RealDemo(RealPlan(phase1=10, phase2=25, phase3=20, chunk=10), world).run()
    assert [c for c in world.calls if c.startswith("traffic 1")] == ["traffic 1 10", "traffic 1 10", "traffic 1 5"]
    assert [c for c in world.calls if c.startswith("traffic 2")] == ["traffic 2 10", "traffic 2 10"]
    assert out.stale is None and out.moved is None and out.back is False


def test_a_domain_that_never_left_is_not_back_and_phase_three_runs_its_whole_time():
    world = FakeWorld(fire_after=1, move_after=99, back_after=1)
    out = RealDemo(RealPlan(phase1=10, phase2=20, phase3=30, chunk=10), world).run()
    assert out.stale is not None and out.moved is None
    assert out.back is False
    assert [c for c in world.calls if c.startswith("traffic 2")] == ["traffic 2 10"] * 3


def test_stale_draft_from_before_the_update_is_not_the_update_s():
    world = FakeWorld(fire_after=None, move_after=1)
    world.alerts = lambda: [stale_alert(world.updated - 1.0 if world.updated else 0.0)]
    out = RealDemo(RealPlan(phase1=10, phase2=20, phase3=10, chunk=10), world).run()
    assert out.stale is None


def test_names_both_compares_whole_versions():
    # v2's version is v1's with the adapter's appended: a text naming v2 twice contains v1 as a substring
    assert names_both(stale_alert(0.0), V1, V2)
    assert not names_both(stale_alert(0.0, old=V1["k3"], new=V1["k3"]), V1, V2)
    assert not names_both(stale_alert(0.0, old=V2["k3"], new=V2["k3"]), V1, V2)


def test_moved_at_is_the_first_request_after_the_last_one_on_the_old_pool():
    before = [result("logs", "k3", t) for t in range(5)] + [result("chat", "off", 9.0)]
    after = [result("logs", "k3", 1.0), result("logs", "off", 2.0), result("logs", "k3", 3.0),
             result("logs", "off", 4.0), result("logs", "k8", 5.0), result("logs", "off", 6.0)]
    assert moved_at(before, after, "logs") == {"from": "k3", "to": "off", "seconds": 4.0, "requests_before": 3}
    assert moved_at(before, after[:3], "logs") is None  # back on k3 at the end: not moved
    assert moved_at(before, after, "json") is None


def test_phase_rows_count_failures_apart_and_leave_them_out_of_rates():
    rows = phase_rows({"A": [result("logs", "k3", 0, drafted=10, accepted=4, tokens=30, seconds=2.0),
                             result("logs", "off", 1, drafted=0, accepted=0, tokens=10, seconds=2.0),
                             result("logs", None, 2, tokens=0, seconds=30.0, error="HTTP 502")]})
    assert rows == [{"phase": "A", "domain": "logs", "requests": 2, "failed": 1, "pools": "k3 1, off 1",
                     "pool_counts": {"k3": 1, "off": 1}, "acceptance": pytest.approx(0.4), "tps": pytest.approx(10.0)}]


def test_plan_refuses_non_positive_seconds():
    with pytest.raises(ValueError, match="phase2"):
        RealPlan(phase2=0)


def test_redistillation_focuses_on_the_stale_domain_and_keeps_a_few_of_the_others():
    from agent.demo.real_redistill import focus

    sample = {"logs": [f"l{i}" for i in range(30)], "chat": [f"c{i}" for i in range(30)], "json": ["j0"], "copy": []}
    picked = focus(sample, "logs", own=16, others=4)
    assert picked == {"logs": [f"l{i}" for i in range(16)], "chat": ["c0", "c1", "c2", "c3"], "json": ["j0"]}
    assert focus(sample, None, own=16, others=2) == {"logs": ["l0", "l1"], "chat": ["c0", "c1"], "json": ["j0"]}


def test_the_live_answers_are_dealt_out_among_servers_and_come_back_in_order(monkeypatch):
    from agent.demo import real_redistill
    from agent.pretrained import teacher

    asked: dict[str, list[str]] = {}

    def engine_streams(url, tokenizer, conversations, new_tokens, concurrency):
        asked[url] = [c[0]["content"] for c in conversations]
        return [[ord(c[0]["content"][-1]), len(url)] for c in conversations]

    monkeypatch.setattr(teacher, "engine_streams", engine_streams)
    sample = {"logs": ["a1", "a2", "a3"], "chat": ["b4", "b5"]}
    out = real_redistill.live_streams(["http://one", "http://second"], None, sample)
    assert asked == {"http://one": ["a1", "a3", "b5"], "http://second": ["a2", "b4"]}
    assert [s[0] for s in out] == [ord(str(i)) for i in range(1, 6)]  # the sample's order
    assert [s[1] for s in out] == [10, 13, 10, 13, 10]  # every other prompt from each server
    assert real_redistill.live_streams("http://one", None, {"logs": ["z9"]}) == [[ord("9"), 10]]


def test_phase_two_goes_on_one_round_after_stale_draft_when_the_domain_does_not_move():
    world = FakeWorld(fire_after=2, move_after=99, back_after=99)
    out = RealDemo(RealPlan(phase1=10, phase2=60, phase3=10, chunk=10), world).run()
    assert [c for c in world.calls if c.startswith("traffic 1")] == ["traffic 1 10"] * 3
    assert out.stale is not None and out.moved is None
    none_after = RealDemo(RealPlan(phase1=10, phase2=60, phase3=10, chunk=10, after_stale=0),
                          FakeWorld(fire_after=2, move_after=99, back_after=99))
    none_after.run()
    assert [c for c in none_after.world.calls if c.startswith("traffic 1")] == ["traffic 1 10"] * 2
    with pytest.raises(ValueError, match="after_stale"):
        RealPlan(after_stale=-1)
