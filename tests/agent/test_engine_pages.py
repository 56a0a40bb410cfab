"""Engine page readers (agent/scrape/pages) on each engine's own exposition: vLLM, SGLang and TensorRT-LLM
pages rendered by prometheus-client from the engines' metric definitions (fixtures/engines/generate.py),
llama.cpp pages captured from a real llama-server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.scrape.pages import PageError, detect, read_page
from agent.scrape.pages.page import Page
from agent.scrape.pages.sglang import draft_lengths

PAGES = Path(__file__).parent / "fixtures" / "engines"
VLLM_PAGE = Path(__file__).parent / "data" / "vllm_metrics_1.txt"


def text(name: str) -> str:
    return (PAGES / f"{name}.txt").read_text()


def truth(name: str):
    return json.loads((PAGES / f"{name}.truth.json").read_text())


def without(page: str, part: str) -> str:
    """``page`` without its lines containing ``part``."""
    return "\n".join(line for line in page.splitlines() if part not in line) + "\n"


def delta(engine_page: str, before: int, after: int):
    """The counts between two pages of one engine with one series each."""
    [a], [b] = read_page(text(f"{engine_page}_{before}")), read_page(text(f"{engine_page}_{after}"))
    return b.counters.settle(a.counters).minus(a.counters.settle(None))


def counts(c) -> dict:
    return {"passes": c.drafts, "drafted": c.draft_tokens, "accepted": c.accepted, "per_pos": list(c.per_pos)}


@pytest.mark.parametrize("page, engine", [
    ("vllm_two_models_1", "vllm"), ("llamacpp_b11434_1", "llamacpp"), ("sglang_new_1", "sglang"),
    ("sglang_old_1", "sglang"), ("trtllm_1", "trtllm")])
def test_the_reader_is_chosen_from_the_page(page, engine):
    assert [r.NAME for r in detect(Page.parse(text(page)))] == [engine]
    assert {s.engine for s in read_page(text(page))} == {engine}


def test_a_page_with_two_engines_yields_both():
    both = read_page(text("trtllm_1") + VLLM_PAGE.read_text())
    assert sorted(s.engine for s in both) == ["trtllm", "vllm"]


def test_vllm_two_models_are_two_series_with_exact_counts():
    first, second = read_page(text("vllm_two_models_1")), read_page(text("vllm_two_models_2"))
    assert {s.model for s in first} == {"meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-7B-Instruct"}
    expected = truth("vllm_two_models")
    for a, b in zip(sorted(first, key=lambda s: s.key), sorted(second, key=lambda s: s.key)):
        assert a.key == b.key and a.label("engine") == "0"
        assert counts(a.counters) == expected[a.model][0]
        assert counts(b.counters.minus(a.counters)) == expected[a.model][1]
        assert a.counters.created == 1_718_000_000.0
    # step time: the delta of vllm:inter_token_latency_seconds_sum (300 steps of 18 ms for Llama)
    llama = [s for s in second if s.model.startswith("meta")][0].counters
    assert llama.seconds == pytest.approx(800 * 0.018)


def test_llamacpp_real_pages():
    idle, [first], [second] = (read_page(text(f"llamacpp_b11434_{n}")) for n in ("idle", 1, 2))
    assert idle[0].counters.per_pos == () and idle[0].counters.drafts == 0  # no per-position family yet
    assert first.model is None and first.labels == ()
    c = first.counters
    assert (c.drafts, c.draft_tokens, c.accepted, c.per_pos) == (20, 75, 25, (12, 5, 4, 4))
    d = second.counters.minus(first.counters)
    assert (d.drafts, d.draft_tokens, d.accepted, d.per_pos) == (10, 36, 36, (10, 10, 8, 8))
    assert d.seconds == pytest.approx(0.013014 - 0.008684) and d.problem() is None
    # counts of the first drafts come right after the idle page, whose positions were still absent
    assert idle[0].counters.minus(idle[0].counters).per_pos == ()
    assert first.counters.minus(idle[0].counters).per_pos == (12, 5, 4, 4)


def test_llamacpp_restart_is_seen_without_created_samples():
    [before], [after] = read_page(text("llamacpp_b11434_2")), read_page(text("llamacpp_b11434_restarted"))
    assert after.counters.minus(before.counters) is None
    # even when the spec counters alone would not show it: a witness counter that went down is enough
    witness_only = text("llamacpp_b11434_2").replace("llamacpp:tokens_predicted_total 96",
                                                       "llamacpp:tokens_predicted_total 95")
    [lower] = read_page(witness_only)
    assert lower.counters.minus(before.counters) is None and before.counters.minus(before.counters) is not None


@pytest.mark.parametrize("first, second, counter, lower", [
    (VLLM_PAGE.read_text(), (VLLM_PAGE.parent / "vllm_metrics_2.txt").read_text(),
     'vllm:generation_tokens_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 74000.0', "59000.0"),
    (text("trtllm_1"), text("trtllm_2"), "trtllm_generation_tokens_total{", None)], ids=["vllm", "trtllm"])
def test_a_token_counter_going_down_marks_a_restart_without_created_samples(first, second, counter, lower):
    def strip(page):
        return without(page, "_created")
    [a], [b] = read_page(strip(first)), read_page(strip(second))
    assert b.counters.minus(a.counters) is not None
    line = next(ln for ln in second.splitlines() if ln.startswith(counter))
    went_down = line.rsplit(" ", 1)[0] + " " + (lower or "1.0")
    [c] = read_page(strip(second.replace(line, went_down)))
    assert c.counters.minus(a.counters) is None


def test_llamacpp_build_without_per_position_counter_gives_aggregate_counts():
    [series] = read_page(without(text("llamacpp_b11434_2"), "per_pos"))
    assert series.counters.per_pos is None and series.counters.max_lookahead() == 4  # ceil(111 / 30)


def test_trtllm_counts_equal_the_simulated_passes():
    [first] = read_page(text("trtllm_1"))
    assert first.model == "nvidia/Llama-3.1-8B-Instruct-FP8" and dict(first.labels)["engine_type"] == "trtllm"
    assert counts(first.counters) == truth("trtllm")[0]
    d = delta("trtllm", 1, 2)
    assert counts(d) == truth("trtllm")[1] and d.problem() is None
    assert d.seconds == pytest.approx(0.021 * 476)


def test_trtllm_old_prefix_and_absent_positions():
    old = text("trtllm_1").replace("trtllm_", "trtllm:")
    assert [s.engine for s in read_page(old)] == ["trtllm"]
    # a position never accepted has no child at all: it counts 0
    lines = [ln for ln in text("trtllm_1").splitlines() if not ln.startswith(
        'trtllm_spec_decode_accepted_tokens_total{engine_type="trtllm",model_name="nvidia/Llama-3.1-8B-Instruct-FP8",'
        'token_position="2"}')]
    [series] = read_page("\n".join(lines) + "\n")
    assert series.counters.per_pos == (442, 274, 0)


@pytest.mark.parametrize("definition", ["old", "new"])
def test_sglang_gauges_become_estimated_counts(definition):
    first, second = (read_page(text(f"sglang_{definition}_{n}"))[0] for n in (1, 2))
    assert first.model == "meta-llama/Llama-3.1-8B-Instruct" and dict(first.labels)["tp_rank"] == "0"
    assert first.counters.candidates == (3,)  # K = 3 under either definition of the rate
    d = second.counters.settle(first.counters).minus(first.counters)
    real = truth(f"sglang_{definition}")[1]
    emitted = real["accepted"] + real["passes"]
    assert d.drafts + d.accepted == emitted  # the decode-token counter is exact
    assert d.drafts == round(emitted / 2.1875)  # passes: tokens over the last window's acceptance length
    assert abs(d.drafts - real["passes"]) / real["passes"] < 0.01  # 1914 estimated, 1920 true
    assert d.draft_tokens == 3 * d.drafts and d.per_pos is None and d.problem() is None


def test_sglang_draft_length_from_either_rate_definition():
    assert draft_lengths(2.8, 0.6) == (3,)  # since sglang#23530: (L - 1) / rate
    assert draft_lengths(2.8, 0.7) == (3,)  # before: L / rate - 1
    assert draft_lengths(2.0, 0.5) == (2, 3)  # both whole: undecidable from this reading alone
    assert draft_lengths(1.0, 0.0) == () and draft_lengths(0.0, 0.0) == ()


def test_sglang_ambiguous_reading_keeps_the_known_draft_length():
    [first] = read_page(text("sglang_new_1"))
    settled = first.counters.settle(None)
    ambiguous = text("sglang_new_2").replace("2.1875", "2.0").replace("0.3958333333333333", "0.5")
    [second] = read_page(ambiguous)
    assert second.counters.candidates == (2, 3)
    assert second.counters.settle(settled).lookahead == 3
    assert second.counters.settle(None).lookahead is None
    assert "not decidable" in second.counters.minus(first.counters).problem()


def test_sglang_falls_back_to_the_generation_counter():
    [series] = read_page(without(text("sglang_new_2"), "realtime_tokens"))
    assert series.counters.tokens == 11150


def test_sglang_counter_going_down_is_a_restart():
    [first] = read_page(text("sglang_new_2"))
    [second] = read_page(text("sglang_new_1"))
    assert second.counters.minus(first.counters) is None


@pytest.mark.parametrize("page, message", [
    (without(VLLM_PAGE.read_text(), "spec_decode"), "no vLLM speculative-decoding metrics"),
    (without(text("llamacpp_b11434_1"), "spec_decode"), "--metrics and a draft"),
    (without(text("sglang_new_1"), "spec_accept"), "--speculative-algorithm"),
    (without(text("trtllm_1"), "_tokens_total{"), "return_perf_metrics"),
    ("# TYPE up gauge\nup 1\n", "no speculative-decoding metrics of any engine"),
    ('[{"iter": 1}]', "JSON"),
])
def test_pages_without_speculative_metrics_say_what_is_missing(page, message):
    with pytest.raises(PageError, match=message):
        read_page(page)
