"""Each engine adapter alone (agent/proxy/engines/): detection from an engine's pages, versions, an answer's
figures, the missing field named, and pool-level records from counters."""

from __future__ import annotations

import pytest

from agent.proxy import engines
from agent.proxy.engines import llamacpp, sglang, trtllm, vllm
from agent.proxy.engines.base import Figures, Missing, Served, per_position, record
from agent.proxy.engines.pool_level import POOL_DOMAIN, PoolCounters
from specwatch_core.records import RecordError
from tests.proxy.fake_engine import FIXTURES as LLAMA
from tests.proxy.standins import FIXTURES

SERVED = Served("code", "k3", 3, "t", "d", "r", "pod")
EXAMPLE = FIXTURES["vllm"]["speculative_decoding_example"]


@pytest.mark.parametrize("adapter", engines.ADAPTERS, ids=engines.NAMES)
def test_every_adapter_keeps_the_contract(adapter):
    for name in ("NAME", "TITLE", "MARKER", "PROBES", "PAGES", "COUNTERS", "MISSING"):
        assert hasattr(adapter, name), name
    assert all(callable(getattr(adapter, f)) for f in ("detect", "versions", "figures", "startup", "started"))
    assert adapter.startup({}, 0) == () and adapter.started({}, 0) is True  # no draft: nothing to ask
    assert isinstance(adapter.MARKER, bytes) and adapter.PROBES and adapter.PAGES
    assert adapter.figures({}, 0) is None  # an empty answer records nothing and raises nothing
    assert adapter.MISSING is None or len(adapter.MISSING) == 2
    assert engines.adapter(adapter.NAME) is adapter


def test_per_position_counts_from_an_acceptance_histogram():
    # 39 steps accepted none, 1 one, 0 two, 3 all three: position 0 kept in 4 steps, 1 and 2 in 3
    assert per_position([39, 1, 0, 3]) == (4, 3, 3)
    assert per_position([5]) == () and sum(per_position([2, 4, 1, 3])) == 4 + 2 + 9


@pytest.mark.parametrize("probes, name", [
    ({"/props": LLAMA["props"]}, "llamacpp"),
    ({"/get_model_info": FIXTURES["sglang"]["model_info"]}, "sglang"),
    ({"/model_info": FIXTURES["sglang"]["model_info"]}, "sglang"),
    ({"/prometheus/metrics": "trtllm_request_success_total 1.0\n"}, "trtllm"),
    ({"/version": FIXTURES["vllm"]["version"], "/v1/models": FIXTURES["vllm"]["models"]}, "vllm"),
])
def test_each_engine_is_detected_from_its_own_pages(probes, name):
    assert engines.detect(probes).NAME == name
    assert engines.detect({path: None for path in engines.PROBES}) is None
    assert engines.detect({"/version": {"version": "1"}, "/v1/models": FIXTURES["trtllm"]["models"]}) is None


def test_versions_each_engine_reports():
    found = sglang.versions({"/model_info": FIXTURES["sglang"]["model_info"],
                             "/server_info": FIXTURES["sglang"]["server_info"]})
    assert (found.target, found.draft_path, found.lookahead, found.speculates) == (
        "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.2-1B-Instruct", 3, True)
    plain = sglang.versions({"/model_info": FIXTURES["sglang"]["model_info"],
                             "/server_info": FIXTURES["sglang"]["server_info_plain"]})
    assert (plain.lookahead, plain.speculates, plain.draft_path) == (0, False, None)
    assert vllm.versions({"/v1/models": FIXTURES["vllm"]["models"]}).target == "meta-llama/Llama-3.1-8B-Instruct"
    assert trtllm.versions({"/v1/models": FIXTURES["trtllm"]["models"]}).lookahead is None
    found = llamacpp.versions({"/props": LLAMA["props"], "/slots": [{"speculative": True}]})
    assert found.target_is_path and found.speculates is True


def test_vllm_figures_of_the_documented_example():
    answer = {"usage": {"completion_tokens": 53}, "metrics": {"speculative_decoding": EXAMPLE}}
    f = vllm.figures(answer, 3)
    assert (f.emitted, f.drafted, f.accepted, f.steps, f.lookahead) == (53, 129, 10, 43, 3)
    assert (f.per_position, f.verified, f.seconds) == ((4, 3, 3), 43, None)
    r = record(f, SERVED, 1.0, elapsed=0.5)
    assert (r.steps, r.drafted, r.accepted, r.emitted, r.seconds, r.lookahead) == (43, 129, 10, 53, 0.5, 3)


def test_vllm_without_the_flag_names_the_field_and_plain_pools_need_none():
    answer = {"choices": [{}], "usage": {"completion_tokens": 7}, "metrics": None}
    with pytest.raises(Missing, match="metrics.speculative_decoding") as caught:
        vllm.figures(answer, 3)
    assert "--per-request-spec-decode-metrics" in caught.value.hint
    assert vllm.figures(answer, 0) == Figures(7, steps=7)
    with pytest.raises(Missing, match="usage"):
        vllm.figures({"choices": []}, 0)  # a stream that ended without its usage chunk
    assert vllm.figures(FIXTURES["vllm"]["error"], 3) is None
    assert vllm.figures({**answer, "choices": [{}, {}]}, 3) is None  # n > 1: vLLM reports no figures
    bad = {**answer, "metrics": {"speculative_decoding": {**EXAMPLE, "num_draft_tokens": 1.5}}}
    with pytest.raises(RecordError, match="metrics.speculative_decoding.num_draft_tokens"):
        vllm.figures(bad, 3)


@pytest.mark.parametrize("names", [("spec_num_correct_drafts", "spec_num_proposed_drafts"),
                                   ("spec_accepted_drafts", "spec_proposed_drafts"),
                                   ("spec_accept_token_num", "spec_draft_token_num")])
def test_sglang_figures_under_each_release_naming(names):
    meta = {"completion_tokens": 20, "e2e_latency": 0.25, "spec_verify_ct": 8, names[0]: 11, names[1]: 24,
            "spec_correct_drafts_histogram": [2, 3, 1, 2]}
    f = sglang.figures({"text": "x", "meta_info": meta}, 3)
    assert (f.emitted, f.drafted, f.accepted, f.steps, f.seconds) == (20, 24, 11, 9, 0.25)
    assert (f.per_position, f.verified) == ((6, 3, 2), 8)
    assert sglang.figures({"choices": [{"meta_info": meta}]}, 3) == f


def test_sglang_missing_meta_info_and_nothing_verified():
    with pytest.raises(Missing, match="meta_info") as caught:
        sglang.figures(FIXTURES["sglang"]["chat_answer"] | {"choices": [{"message": {}}]}, 3)
    assert "return_meta_info" in caught.value.hint
    f = sglang.figures({"meta_info": {"completion_tokens": 1, "spec_verify_ct": 0}}, 3)
    assert (f.emitted, f.steps, f.drafted) == (1, 1, 0)
    # no spec_* field before the first verification pass (spec_decoding_meta.py writes them only when > 0)
    assert sglang.figures({"meta_info": {"completion_tokens": 1}}, 3) == Figures(1, steps=1)
    with pytest.raises(RecordError, match="spec_verify_ct"):
        sglang.figures({"meta_info": {"completion_tokens": 5, "spec_verify_ct": 2.0}}, 3)
    assert sglang.figures(FIXTURES["sglang"]["error"], 3) is None


def test_trtllm_reports_nothing_per_request_on_a_speculating_pool():
    answer = {"choices": [{}], "usage": {"completion_tokens": 9}}
    assert trtllm.figures(answer, 0) == Figures(9, steps=9)
    with pytest.raises(Missing, match="per-request speculation counts"):
        trtllm.figures(answer, 2)


def test_a_record_drafting_more_than_the_pool_k_is_refused_naming_the_field():
    with pytest.raises(RecordError, match="lookahead"):
        record(Figures(10, 8, 2, lookahead=4), SERVED, 1.0, 0.1)
    with pytest.raises(RecordError, match="seconds"):
        record(Figures(10, 6, 2), SERVED, 1.0)


def vllm_page(drafts: int, tokens: int, accepted: int, created: float = 100.0) -> str:
    labels = 'engine="0",model_name="m"'
    return (f"vllm:spec_decode_num_drafts_total{{{labels}}} {drafts}\n"
            f"vllm:spec_decode_num_drafts_created{{{labels}}} {created}\n"
            f"vllm:spec_decode_num_draft_tokens_total{{{labels}}} {tokens}\n"
            f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}} {accepted}\n"
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="0"}} {accepted}\n')


def test_pool_level_records_are_counter_deltas_under_one_domain():
    counters = PoolCounters()
    assert counters.take(vllm_page(10, 30, 5), 1000.0, SERVED) is None  # the first reading
    r = counters.take(vllm_page(14, 42, 9), 1002.0, SERVED)
    assert (r.domain, r.pool, r.steps, r.drafted, r.accepted, r.emitted, r.seconds, r.request_id) == (
        POOL_DOMAIN, "k3", 4, 12, 4, 8, 2.0, None)
    assert counters.take(vllm_page(14, 42, 9), 1004.0, SERVED) is None  # nothing drafted since
    assert counters.take(vllm_page(2, 6, 1, created=200.0), 1006.0, SERVED) is None  # a restart
    r = counters.take(vllm_page(3, 9, 2, created=200.0), 1008.0, SERVED)
    assert (r.steps, r.drafted, r.accepted) == (1, 3, 1)


def test_pool_level_counts_from_zero_when_the_engine_writes_no_counter_yet():
    counters = PoolCounters()
    assert counters.take("trtllm_request_success_total 0.0\n", 1.0, SERVED) is None
    page = ('trtllm_spec_decode_drafted_tokens_total{token_position="0"} 5.0\n'
            'trtllm_spec_decode_drafted_tokens_total{token_position="1"} 5.0\n'
            'trtllm_spec_decode_accepted_tokens_total{token_position="0"} 3.0\n')
    r = counters.take(page, 2.0, Served("", "k2", 2, "t", "d"))
    assert (r.steps, r.drafted, r.accepted, r.lookahead) == (5, 10, 3, 2)


def test_the_start_check_each_engine_asks():
    models = {"/v1/models": FIXTURES["vllm"]["models"]}
    (info, _), (probe, body) = vllm.startup(models, 3)
    assert info == "/server_info?config_format=json" and probe == "/v1/completions"
    assert (body["max_tokens"], body["model"], body["n"], body["include_metrics"]) == (
        1, "meta-llama/Llama-3.1-8B-Instruct", 1, True)
    config = FIXTURES["vllm"]["server_info"]
    assert vllm.started({info: config}, 3) is False  # per_request_spec_decode_metrics: none
    on = {"vllm_config": {"observability_config": {"per_request_spec_decode_metrics": "detailed"}}}
    assert vllm.started({info: on}, 3) is True
    assert vllm.started({info: {"vllm_config": str(config)}}, 3) is None  # the text form tells nothing
    assert vllm.started({info: None}, 3) is None  # not in dev mode: the probe tells
    zeros = {**EXAMPLE, "acceptance_histogram": [0, 0, 0, 0], "num_spec_steps": 0, "num_accepted_draft_tokens": 0,
             "num_draft_tokens": 0}
    answered = {"usage": {"completion_tokens": 1}, "choices": [{}]}
    assert vllm.started({info: None, probe: {**answered, "metrics": {"speculative_decoding": zeros}}}, 3) is True
    assert vllm.started({info: None, probe: {**answered, "metrics": None}}, 3) is False
    assert vllm.started({info: None, probe: FIXTURES["vllm"]["error"]}, 3) is None
    assert vllm.figures({**answered, "metrics": {"speculative_decoding": zeros}}, 3) == Figures(
        1, 0, 0, 1, None, (0, 0, 0), 3, 0)  # the probe's own answer would record one plain step
    assert trtllm.startup({}, 2) == () and trtllm.started({}, 2) is False  # pool-level from the start
    assert sglang.started({}, 3) is True and llamacpp.started({}, 4) is True
