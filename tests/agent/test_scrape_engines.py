"""specwatch scrape over every engine's page: records that add up to each interval's counts, one domain and
pod per model, restarts counted from the restart, step time, target versions a drift detector can use."""

from __future__ import annotations

import random
from pathlib import Path
from unittest import mock

import pytest
from prometheus_client import CollectorRegistry, Counter, generate_latest

from agent.scrape.pages import read_page
from agent.scrape.scraper import Scraper, StoreSink
from alerts.watch import DriftWatch
from specwatch_core.records import is_aggregate
from storage import StatsQuery, Store

PAGES = Path(__file__).parent / "fixtures" / "engines"
T0 = 1_718_001_000.0


def text(name: str) -> str:
    return (PAGES / f"{name}.txt").read_text()


class Collect:
    def __init__(self):
        self.records = []

    def write(self, records):
        self.records += records


def scrape(*pages: str, domain="chat", step=15.0, **options) -> tuple[Scraper, list[list]]:
    """Scrape ``pages`` in turn, ``step`` seconds apart; the records of each scrape."""
    sink, now, out = Collect(), [T0], []
    scraper = Scraper(sink, domain=domain, clock=lambda: now[0], **options)
    for page in pages:
        before = len(sink.records)
        scraper.observe_page(page)
        out.append(sink.records[before:])
        now[0] += step
    return scraper, out


def sums(records) -> dict:
    return {"steps": sum(r.steps for r in records), "drafted": sum(r.drafted or r.lookahead * r.steps for r in records),
            "accepted": sum(r.accepted for r in records), "emitted": sum(r.emitted for r in records)}


def per_position(records, k: int) -> list[int]:
    return [sum(r.accepted_mask[i] for r in records if r.lookahead > i) for i in range(k)]


@pytest.mark.parametrize("engine", ["vllm_two_models", "llamacpp_b11434", "trtllm"])
def test_per_position_engines_record_one_exact_step_per_draft(engine):
    first, second = text(f"{engine}_1"), text(f"{engine}_2")
    _, (baseline, records) = scrape(first, second)
    assert baseline == [] and records
    before = {s.key: s for s in read_page(first)}
    for series in read_page(second):
        delta = series.counters.minus(before[series.key].counters)
        mine = [r for r in records if r.target_version == (series.model or "unknown")]
        assert sums(mine) == {"steps": delta.drafts, "drafted": delta.draft_tokens, "accepted": delta.accepted,
                              "emitted": delta.accepted + delta.drafts}
        assert per_position(mine, len(delta.per_pos)) == list(delta.per_pos)
        assert all(r.steps == 1 and not is_aggregate(r) and r.validate() for r in mine)
        # the engine's own step time, shared by the steps
        assert sum(r.seconds for r in mine) == pytest.approx(delta.seconds)


def test_sglang_becomes_one_aggregate_record_per_interval_timed_by_the_interval(tmp_path):
    _, (_, [record]) = scrape(text("sglang_new_1"), text("sglang_new_2"), step=15.0)
    assert is_aggregate(record) and record.accepted_mask is None
    assert (record.steps, record.drafted, record.accepted, record.emitted, record.lookahead) == (
        1914, 5742, 2272, 4186, 3)
    assert record.seconds == 15.0 and record.target_version == "meta-llama/Llama-3.1-8B-Instruct"
    store = Store.open(f"sqlite:///{tmp_path / 'h.db'}", clock=lambda: T0 + 15, backfill=True)
    with store:
        store.write_records([record])
        store.flush()
        [row] = store.stats(StatsQuery(until=T0 + 3600, by=("domain",))).rows
    assert (row["steps"], row["drafted"], row["accepted"]) == (1914, 5742, 2272)


def test_a_page_with_several_models_records_one_domain_and_pod_per_model():
    _, (_, records) = scrape(text("vllm_two_models_1"), text("vllm_two_models_2"), pod="gw")
    by_model = {r.target_version: (r.domain, r.pod) for r in records}
    assert by_model == {"meta-llama/Llama-3.1-8B-Instruct": ("chat/meta-llama/Llama-3.1-8B-Instruct",
                                                             "gw/meta-llama/Llama-3.1-8B-Instruct"),
                        "Qwen/Qwen2.5-7B-Instruct": ("chat/Qwen/Qwen2.5-7B-Instruct", "gw/Qwen/Qwen2.5-7B-Instruct")}
    _, (_, named) = scrape(text("vllm_two_models_1"), text("vllm_two_models_2"), domain="{model_name}-e{engine}")
    assert {r.domain for r in named} == {"meta-llama/Llama-3.1-8B-Instruct-e0", "Qwen/Qwen2.5-7B-Instruct-e0"}
    _, (_, fixed) = scrape(text("vllm_two_models_1"), text("vllm_two_models_2"), target_version="v7")
    assert len({r.domain for r in fixed}) == 2 and {r.target_version for r in fixed} == {"v7"}
    _, (_, single) = scrape(text("llamacpp_b11434_1"), text("llamacpp_b11434_2"), pod="gw")
    assert {(r.domain, r.pod) for r in single} == {("chat", "gw")}


def test_a_domain_template_naming_a_missing_label_is_a_clear_error():
    from agent.scrape.pages import PageError

    with pytest.raises(PageError, match=r"--domain uses \{tp_rank\}"):
        scrape(text("trtllm_1"), text("trtllm_2"), domain="{tp_rank}")


def test_restarts_count_from_the_restart_and_never_go_negative():
    # llama.cpp: no _created; the counters went down
    _, (_, _, restarted) = scrape(text("llamacpp_b11434_1"), text("llamacpp_b11434_2"),
                                  text("llamacpp_b11434_restarted"))
    assert sums(restarted) == {"steps": 15, "drafted": 57, "accepted": 7, "emitted": 22}
    assert sum(r.seconds for r in restarted) == pytest.approx(0.006064)
    # TensorRT-LLM: new _created times, counts smaller than before
    later = text("trtllm_1").replace("1.7180000135e+09", "1.7180009e+09")
    scraper, (_, _, since) = scrape(text("trtllm_1"), text("trtllm_2"), later)
    assert sums(since)["steps"] == 707  # everything since the restart: trtllm_1's counts
    # SGLang: the token counter went down
    _, (_, [again]) = scrape(text("sglang_new_2"), text("sglang_new_1"))
    assert again.emitted == 6964 and again.steps == round(6964 / 2.178125)
    for record in restarted + since + [again]:
        assert min(record.steps, record.accepted, record.emitted, record.lookahead, record.seconds) >= 0
        record.validate()


def test_steps_without_engine_time_get_the_scrape_interval():
    no_time = [ln for ln in text("llamacpp_b11434_1").splitlines() if "tokens_predicted_seconds" not in ln]
    no_time2 = [ln for ln in text("llamacpp_b11434_2").splitlines() if "tokens_predicted_seconds" not in ln]
    _, (_, records) = scrape("\n".join(no_time) + "\n", "\n".join(no_time2) + "\n", step=12.0)
    assert len(records) == 10 and sum(r.seconds for r in records) == pytest.approx(12.0)


def test_counts_that_stay_inconsistent_are_written_as_one_aggregate():
    # per-position counts that cannot come from prefix acceptance (e.g. llama.cpp's replayed drafts) but
    # totals that make an aggregate
    broken = text("llamacpp_b11434_2").replace('per_pos_total{position="3"} 12', 'per_pos_total{position="3"} 13')
    scraper, results = scrape(text("llamacpp_b11434_1"), broken, broken, broken, max_held=2)
    assert [len(r) for r in results] == [0, 0, 0, 1]
    [record] = results[-1]
    assert is_aggregate(record) and (record.steps, record.drafted, record.accepted) == (10, 36, 36)


def test_llamacpp_target_version_comes_from_the_engine_and_can_be_overridden():
    asked = []

    def identify(engine):
        asked.append(engine)
        return "target-v1-20fa2c53b543-f32.gguf"
    _, (_, records) = scrape(text("llamacpp_b11434_1"), text("llamacpp_b11434_2"), identify=identify)
    assert {r.target_version for r in records} == {"target-v1-20fa2c53b543-f32.gguf"} and "llamacpp" in asked
    _, (_, fixed) = scrape(text("llamacpp_b11434_1"), text("llamacpp_b11434_2"), identify=identify,
                           target_version="v7")
    assert {r.target_version for r in fixed} == {"v7"}


class VllmEngine:
    """A vLLM v1 metrics page (SpecDecodingProm's counters) for a model, its counters made by prometheus-client."""

    def __init__(self, model: str, started: float, k: int = 4):
        self.model, self.k, self.registry = model, k, CollectorRegistry()
        with mock.patch("prometheus_client.metrics.time", mock.Mock(time=lambda: started)):
            make = lambda name: Counter(f"vllm:spec_decode_num_{name}", name, ["model_name", "engine"],  # noqa: E731
                                        registry=self.registry).labels(model, "0")
            self.drafts, self.tokens, self.accepted = make("drafts"), make("draft_tokens"), make("accepted_tokens")
            pos = Counter("vllm:spec_decode_num_accepted_tokens_per_pos", "p", ["model_name", "engine", "position"],
                          registry=self.registry)
            self.per_pos = [pos.labels(model, "0", str(i)) for i in range(k)]

    def run(self, rng: random.Random, n: int, p: float) -> str:
        for _ in range(n):
            accepted = 0
            while accepted < self.k and rng.random() < p:
                accepted += 1
            self.drafts.inc()
            self.tokens.inc(self.k)
            self.accepted.inc(accepted)
            for i in range(accepted):
                self.per_pos[i].inc()
        return generate_latest(self.registry).decode()


def test_a_new_target_model_on_the_page_fires_stale_draft_in_scrape_mode():
    rng = random.Random(3)
    old, new = VllmEngine("acme/target-v1", T0 - 100), VllmEngine("acme/target-v2", T0 + 1000)
    pages = [old.run(rng, 40, 0.85) for _ in range(12)] + [new.run(rng, 40, 0.35) for _ in range(12)]
    _, scraped = scrape(*pages, domain="code", step=100.0)
    watch = DriftWatch()
    found = [(i, f) for i, batch in enumerate(scraped) for r in batch for f in watch.observe(r)]
    assert [f.alertname for _, f in found] == ["StaleDraft"]
    i, finding = found[0]
    assert i >= 12  # after the restart on the new model
    notes = finding.annotations
    assert (notes["old_target_version"], notes["new_target_version"]) == ("acme/target-v1", "acme/target-v2")


@pytest.mark.parametrize("seed", range(20))
def test_an_interval_past_max_steps_becomes_several_valid_aggregates(seed):
    from agent.scrape.pages.counts import SpecCounters
    from agent.scrape.records import aggregate, split_counts

    rng = random.Random(seed)
    steps = rng.choice((1, 7, 10, 11, 10_000_000, 25_000_001, rng.randint(1, 10**9)))
    k = rng.randint(1, 8)
    drafted = rng.choice((0, k * steps, rng.randint(0, k * steps)))
    accepted = rng.choice((0, drafted, rng.randint(0, drafted)))
    most = max(rng.choice((1, 3, 10, 10_000_000)), steps // 1000)  # at most ~1000 parts
    parts = split_counts(steps, drafted, accepted, most)
    assert [sum(p[i] for p in parts) for i in range(3)] == [steps, drafted, accepted]
    assert all(1 <= s <= most and 0 <= a <= d <= k * s for s, d, a in parts)
    records = aggregate(SpecCounters(steps, drafted, accepted, None, lookahead=k), domain="d", target_version="t",
                        draft_version="v", seconds=30.0)
    assert all(r.validate() and r.steps <= 10_000_000 for r in records)
    assert sum(r.steps for r in records) == steps and sum(r.seconds for r in records) == pytest.approx(30.0)
