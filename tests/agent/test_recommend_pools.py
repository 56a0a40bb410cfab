"""The pools a recommendation asks for and each engine's configuration of them (agent/advice/pools.py), and
`specwatch recommend --engine vllm|sglang|trtllm` printing them."""

from __future__ import annotations

import json

from agent.advice.pools import MAX_BATCH, PoolPlan, configure, plan
from agent.advice.recommend import Arm, DomainAdvice, PodAdvice, Recommendation, Route
from tests.agent.test_recommend import command, history, store  # noqa: F401 - the fixture


def advice(best: dict[str, int | None], pod: int | None, routes: dict[str, int]) -> Recommendation:
    domains = tuple(DomainAdvice(d, k, 100, "", (Arm(k or 0, 500, 100, 1.0, 5, 100.0, 1.0, True),))
                    for d, k in best.items())
    return Recommendation("t", "d", 0.0, 1.0, domains,
                          PodAdvice(pod, 1.0, "", tuple(Route(d, k, 0.2) for d, k in routes.items())))


def test_routed_domains_get_a_pool_of_their_own_and_the_rest_share_the_pod_pool():
    pools = plan(advice({"code": 4, "chat": 2, "logs": 0, "new": None}, 2, {"code": 4, "logs": 0}))
    assert [(p.name, p.lookahead, p.domains, p.own) for p in pools] == [
        ("k2", 2, ("chat", "new"), False), ("k4", 4, ("code",), True), ("off", 0, ("logs",), True)]
    assert plan(advice({"a": None}, None, {})) == ()


def test_a_speculating_pool_whose_domains_prefer_other_k_adapts_between_them():
    pools = plan(advice({"code": 6, "chat": 2, "prose": 3}, 3, {}))
    assert [(p.name, p.adaptive) for p in pools] == [("k3", (2, 3, 6))]
    assert plan(advice({"a": 0, "b": 0}, 0, {}))[0].adaptive == ()  # off adapts nothing


def test_each_engine_configures_a_pool():
    k4, off = PoolPlan("k4", 4, ("code",), True), PoolPlan("off", 0, ("logs",), True)
    vllm = configure("vllm", k4, "org/draft")
    config = json.loads(vllm.flags.split("'")[1])
    assert config == {"method": "draft_model", "model": "org/draft", "num_speculative_tokens": 4}
    assert vllm.flags.endswith("--per-request-spec-decode-metrics summary")
    assert configure("vllm", off).flags == "no --speculative-config"
    trt = configure("trtllm", k4, "/d")
    assert "max_draft_len: 4" in trt.flags and f"draft_len_schedule: {{{MAX_BATCH}: 4}}" in trt.flags
    assert configure("trtllm", off).flags == "no speculative_config"
    assert "--speculative-num-steps 4 " in configure("sglang", k4).flags and not configure("sglang", k4).files
    adaptive = configure("sglang", PoolPlan("k6", 6, ("a", "b"), False, (2, 6)), "org/draft")
    assert "--speculative-num-steps 6 " in adaptive.flags
    assert adaptive.flags.endswith("--speculative-adaptive --speculative-adaptive-config adaptive-k6.json")
    assert dict(adaptive.files) == {"adaptive-k6.json": '{"candidate_steps": [2, 6]}'}


def test_the_command_prints_each_pool_configuration(tmp_path, store):  # noqa: F811 - the fixture
    history(store)
    run = command(tmp_path)[0]
    out = run("--engine", "vllm", "--draft", "org/draft")
    assert out.exit_code == 0, out.output
    assert "pool k4 (code; " in out.output and "--per-request-spec-decode-metrics summary" in out.output
    assert "pool off (logs; routed here: a pool of their own): no --speculative-config" in out.output
    data = json.loads(run("--format", "json", "--engine", "trtllm").output)
    by = {p["name"]: p for p in data["pools"]}
    assert by["off"]["domains"] == ["logs"] and by["off"]["own"]
    assert "draft_len_schedule" in by["k4"]["config"]["trtllm"]["flags"]
