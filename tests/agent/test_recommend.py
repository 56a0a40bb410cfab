"""``specwatch recommend`` on stored history (SQLite): per-domain K with evidence, the pod-wide K over the
domains' traffic, routing advice, engine flags, and the command's three formats."""

from __future__ import annotations

import json
import math
import random

import pytest
from typer.testing import CliRunner

from agent.advice import engine_flags
from agent.cli import _register, app
from agent.advice.recommend import (Arm, DomainAdvice, RecommendConfig, choose, pod_choice, ratio_stderr,
                                    recommend)
from history import T0, aggregate
from storage import Store

# tokens per second of step time per domain and K; "code" pays most at K = 4, "logs" does not pay at all
RATES = {"code": {0: 100.0, 2: 170.0, 4: 210.0}, "logs": {0: 100.0, 2: 85.0, 4: 60.0}}
NOW = T0 + 2 * 3600


def history(store: Store, rates=RATES, start: float = T0 + 3600, minutes: int = 60, target: str = "t2",
            requests: int = 2, seed: int = 0) -> dict:
    """Aggregates (one request of 20 steps each) every minute for each domain and K; returns the sums."""
    rng = random.Random(seed)
    sums: dict = {}
    records = []
    for m in range(minutes):
        for domain, per_k in rates.items():
            for k, rate in per_k.items():
                for r in range(requests):
                    accepted = round(20 * k * 0.6 * rng.uniform(0.8, 1.2)) if k else 0
                    emitted = accepted + 20
                    seconds = emitted / (rate * rng.uniform(0.9, 1.1))
                    records.append(aggregate(domain, k, steps=20, accepted=accepted, seconds=seconds,
                                             ts=start + 60 * m + r, target=target))
                    e, s = sums.get((domain, k), (0, 0.0))
                    sums[(domain, k)] = (e + emitted, s + seconds)
    store.write_records(records)
    store.flush(math.inf)
    return sums


@pytest.fixture
def store(tmp_path):
    s = Store.open(f"sqlite:///{tmp_path / 'rec.db'}", clock=lambda: NOW, backfill=True)
    yield s
    s.close(flush=False)


def test_each_domain_gets_the_k_of_best_measured_goodput(store):
    sums = history(store)
    result = recommend(store, since=T0, now=NOW)
    assert (result.target_version, result.draft_version) == ("t2", "d1")
    by = {d.domain: d for d in result.domains}
    assert (by["code"].lookahead, by["code"].speculate) == (4, True)
    assert (by["logs"].lookahead, by["logs"].speculate) == (0, False)
    assert "clear over K=2" in by["code"].reason and "clear over K=2" in by["logs"].reason
    for (domain, k), (e, s) in sums.items():  # goodput is the ratio of the stored sums
        assert by[domain].goodput(k) == pytest.approx(e / s, rel=1e-3)
    arm = next(a for a in by["code"].arms if a.lookahead == 4)
    assert arm.buckets == 60 and arm.steps == 60 * 2 * 20 and 0 < arm.stderr < 0.02 * arm.goodput


def test_only_the_latest_target_counts(store):
    history(store, rates={"code": {0: 300.0, 4: 50.0}}, start=T0, target="t1")  # old target: K = 0 won
    history(store, rates={"code": {0: 100.0, 4: 210.0}}, start=T0 + 3600, target="t2")
    (code,) = recommend(store, since=T0, now=NOW).domains
    assert code.lookahead == 4 and code.goodput(0) == pytest.approx(100.0, rel=0.05)


def test_too_little_history_is_not_enough_data(store):
    history(store, rates={"rare": {0: 100.0, 4: 210.0}}, minutes=2)  # 80 steps per K in 2 minutes
    (rare,) = recommend(store, since=T0, now=NOW).domains
    assert rare.lookahead is None and rare.speculate is None
    assert rare.reason.startswith("not enough data (a K needs 200 steps in 3 minutes; seen: K=0 80 steps")
    result = recommend(store, since=T0, now=NOW, config=RecommendConfig(min_steps=50, min_buckets=2))
    assert result.domains[0].lookahead == 4


def test_without_k0_history_the_on_off_question_is_left_open(store):
    history(store, rates={"code": {2: 170.0, 4: 210.0}})
    (code,) = recommend(store, since=T0, now=NOW).domains
    assert code.lookahead == 4 and "K=0 not measured enough" in code.reason


def test_the_pod_k_maximises_goodput_over_the_domains_traffic(store):
    sums = history(store, rates={**RATES, "chat": {0: 100.0, 2: 160.0, 4: 150.0}})
    result = recommend(store, since=T0, now=NOW)
    tokens = {d: sum(e for (dd, _), (e, _) in sums.items() if dd == d) for d in ("code", "logs", "chat")}

    def pod(k):  # total tokens over total time if every domain ran at K
        return sum(tokens.values()) / sum(t / (sums[(d, k)][0] / sums[(d, k)][1]) for d, t in tokens.items())

    best = max((0, 2, 4), key=pod)
    assert result.pod.lookahead == best and result.pod.goodput == pytest.approx(pod(best))
    routed = {r.domain: r.lookahead for r in result.pod.routes}
    assert routed == {d.domain: d.lookahead for d in result.domains
                      if d.lookahead != best and d.goodput(d.lookahead) > 1.05 * d.goodput(best)}


def test_pod_choice_by_hand():
    def domain(name, tokens, rates):
        arms = tuple(Arm(k, 1000, 0, 1.0, 10, g, 1.0, True) for k, g in rates.items())
        k, why = choose(arms, RecommendConfig())
        return DomainAdvice(name, k, tokens, why, arms)
    # 90% of the tokens in a domain that likes K = 4, 10% in one that likes K = 0. At K = 4 the pod takes
    # 0.9/200 + 0.1/50 = 0.0065 s per token (154 tok/s); at K = 0, 0.9/100 + 0.1/100 = 0.01 (100 tok/s).
    pod = pod_choice([domain("a", 900, {0: 100.0, 4: 200.0}), domain("b", 100, {0: 100.0, 4: 50.0})],
                     RecommendConfig())
    assert pod.lookahead == 4 and pod.goodput == pytest.approx(1 / 0.0065)
    assert [(r.domain, r.lookahead, round(r.gain, 3)) for r in pod.routes] == [("b", 0, 1.0)]
    # the arithmetic mean of rates would say the same here but not at 50/50 traffic: 0.5/200 + 0.5/50 =
    # 0.0125 s per token (80 tok/s) at K = 4 loses to K = 0 (100 tok/s), though (200 + 50) / 2 > 100
    pod = pod_choice([domain("a", 500, {0: 100.0, 4: 200.0}), domain("b", 500, {0: 100.0, 4: 50.0})],
                     RecommendConfig())
    assert pod.lookahead == 0


def test_ratio_stderr_is_the_delta_method_over_clusters():
    pairs = [(10.0, 1.0), (12.0, 1.0), (8.0, 1.0), (10.0, 1.0)]
    # R = 10; residuals 0, 2, -2, 0: variance 8 / 3, stderr sqrt(8/3 / 4) / 1
    assert ratio_stderr(pairs) == pytest.approx(math.sqrt(8 / 3 / 4))
    assert ratio_stderr([(10.0, 1.0)]) is None


@pytest.mark.parametrize("engine, on, off", [
    ("llamacpp", "-md d.gguf --spec-type draft-simple --spec-draft-n-max 3", "no -md"),
    ("vllm", """--speculative-config '{"method": "draft_model", "model": "d.gguf", "num_speculative_tokens": 3}'""",
     "no --speculative-config"),
    ("sglang", "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4",
     "no --speculative-"),
    ("trtllm", "max_draft_len: 3", "no speculative_config"),
])
def test_engine_flags(engine, on, off):
    assert on in engine_flags.flags(engine, 3, "d.gguf")
    assert engine_flags.flags(engine, 0, "d.gguf").startswith(off)
    if engine == "vllm":
        config = json.loads(engine_flags.flags(engine, 3, "d.gguf").split("'")[1])
        assert config["num_speculative_tokens"] == 3
    with pytest.raises(ValueError, match="engine"):
        engine_flags.flags("tgi", 3)


def command(tmp_path):
    """``run(*args)``: `specwatch recommend` over the store's database (its history since 2023-11-14)."""
    url = f"sqlite:///{tmp_path / 'rec.db'}"
    _register()
    runner = CliRunner()
    run = lambda *args: runner.invoke(app, ["recommend", "--db", url, "--since", "2023-11-14T00:00:00Z", *args])
    return run, runner, url


def test_the_command_prints_table_json_and_csv(tmp_path, store):
    history(store)
    run, runner, url = command(tmp_path)
    since = ["--since", "2023-11-14T00:00:00Z"]
    out = runner.invoke(app, ["recommend", "--db", url, *since, "--engine", "llamacpp", "--draft", "d.gguf"])
    assert out.exit_code == 0, out.output
    assert "code" in out.output and "pod-wide: K=" in out.output
    assert "--spec-draft-n-max 4" in out.output and "route logs to a pool with K=0" in out.output
    out = runner.invoke(app, ["recommend", "--db", url, *since, "--format", "json"])
    data = json.loads(out.output)
    assert {d["domain"]: d["lookahead"] for d in data["domains"]} == {"code": 4, "logs": 0}
    assert set(data["flags"]) == set(engine_flags.ENGINES) and data["pod"]["lookahead"] in (0, 2, 4)
    assert data["flags"]["vllm"]["domains"]["logs"] == "no --speculative-config"
    out = runner.invoke(app, ["recommend", "--db", url, *since, "--format", "csv", "--engine", "sglang"])
    lines = out.output.strip().splitlines()
    assert lines[0].startswith("domain,lookahead,speculate,pool,") and lines[0].endswith("sglang_flags")
    assert lines[-1].startswith("(pod),")
    out = runner.invoke(app, ["recommend", "--db", url, "--since", "yesterday"])
    assert out.exit_code == 1 and "error:" in out.output


@pytest.mark.parametrize("change, message", [({"min_steps": 0}, "min_steps must be a whole number >= 1"),
                                             ({"z": -1.0}, "z must be a finite number >= 0"),
                                             ({"route_gain": math.nan}, "route_gain must be")])
def test_config_is_validated(change, message):
    with pytest.raises(ValueError, match=message):
        RecommendConfig(**change)


def test_llamacpp_flags_for_ngram_self_speculation():
    """K for an n-gram pool is the cap on a step's draft, with no draft model loaded."""
    from agent.advice.engine_flags import flags

    assert flags("llamacpp", 24, "ngram-mod") == ("--spec-type ngram-mod --spec-ngram-mod-n-max 24 "
                                                   "--spec-ngram-mod-n-min 18")
    assert flags("llamacpp", 8, "ngram-simple") == "--spec-type ngram-simple --spec-ngram-simple-size-m 8"
    assert flags("llamacpp", 0, "ngram-mod").startswith("no -md")
    assert flags("llamacpp", 3, "d.gguf") == "-md d.gguf --spec-type draft-simple --spec-draft-n-max 3"
