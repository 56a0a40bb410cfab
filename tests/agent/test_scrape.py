"""specwatch scrape's library: vLLM pages -> counter deltas -> synthetic steps whose sums match exactly."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from agent.scrape.pages import vllm
from agent.scrape.pages.counts import PageError, SpecCounters
from agent.scrape.pages.page import Page
from agent.scrape.scraper import Scraper, StoreSink, accepted_lengths, lookahead_groups, synthesize
from storage import StatsQuery, Store

DATA = Path(__file__).with_name("data")
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
T0 = 1_718_001_000.0


def page(n: int) -> str:
    return (DATA / f"vllm_metrics_{n}.txt").read_text()


def parse_page(text: str) -> dict[tuple[str, str], SpecCounters]:
    """Each vLLM engine's counters on a page, keyed (model_name, engine); PageError when they are missing."""
    return {(s.label("model_name") or "", s.label("engine") or ""): s.counters for s in vllm.read(Page.parse(text))}


def vllm_delta(drafts: list[tuple[int, int]], k: int) -> SpecCounters:
    """What vLLM's counters add up for drafts of (drafted, accepted) tokens (SpecDecodingStats.observe_draft)."""
    per_pos = [0] * k
    for _, accepted in drafts:
        for i in range(accepted):
            per_pos[i] += 1
    return SpecCounters(len(drafts), sum(t for t, _ in drafts), sum(a for _, a in drafts), tuple(per_pos))


def per_position(records) -> list[int]:
    """Records accepted at each position (0-based), from the accepted masks."""
    width = max((r.lookahead for r in records), default=0)
    return [sum(r.accepted_mask[i] for r in records if r.lookahead > i) for i in range(width)]


def check_exact(records, delta: SpecCounters) -> None:
    k = len(delta.per_pos)
    assert len(records) == delta.drafts
    assert sum(r.lookahead for r in records) == delta.draft_tokens
    assert sum(r.accepted for r in records) == delta.accepted
    assert (per_position(records) + [0] * k)[:k] == list(delta.per_pos)
    for r in records:
        r.validate()
        assert 1 <= r.lookahead <= k and r.draft_seconds == r.verify_seconds == 0.0


def test_parse_the_recorded_page():
    counters = parse_page(page(1))
    assert list(counters) == [(MODEL, "0")]
    c = counters[(MODEL, "0")]
    assert (c.drafts, c.draft_tokens, c.accepted, c.per_pos) == (1200, 4800, 2755, (1000, 800, 600, 355))
    assert c.created == pytest.approx(1718000000.537, abs=0.01)  # the earliest child's creation time


@pytest.mark.parametrize("seed", range(30))
def test_synthesized_steps_reproduce_every_count(seed):
    rng = random.Random(seed)
    k = rng.randint(1, 8)
    rate = rng.uniform(0.05, 0.95)
    drafts = []
    for _ in range(rng.randint(1, 400)):
        tokens = k if rng.random() < 0.6 else rng.randint(1, k)  # ngram-like proposers draft fewer at times
        accepted = 0
        while accepted < tokens and rng.random() < rate:
            accepted += 1
        drafts.append((tokens, accepted))
    delta = vllm_delta(drafts, k)
    assert delta.problem() is None
    check_exact(synthesize(delta, domain="d", target_version="t", draft_version="x"), delta)


def test_a_naive_synthesis_fails_the_same_check():
    # Power: spreading accepted tokens evenly over K-token drafts matches D, T and A but not per_pos.
    delta = vllm_delta([(4, 4), (4, 0), (4, 2), (4, 2)], 4)
    naive = synthesize(SpecCounters(4, 16, 8, (2, 2, 2, 2)), domain="d", target_version="t", draft_version="x")
    with pytest.raises(AssertionError):
        check_exact(naive, delta)


def test_records_come_in_no_artificial_runs():
    delta = SpecCounters(300, 1200, 680, (250, 200, 145, 85))
    first = synthesize(delta, domain="d", target_version="t", draft_version="x")
    again = synthesize(delta, domain="d", target_version="t", draft_version="x")
    assert [r.accepted for r in first] == [r.accepted for r in again]  # reproducible
    longest = run = 1
    for a, b in zip(first, first[1:]):
        run = run + 1 if a.accepted == b.accepted else 1
        longest = max(longest, run)
    assert longest < 12  # grouped by accepted length, the longest run would be 85


def test_uniform_lookahead_when_every_draft_has_k_tokens():
    delta = SpecCounters(300, 1200, 680, (250, 200, 145, 85))
    assert accepted_lengths(delta) == [50, 50, 55, 60, 85]
    assert {k for _, k, _ in lookahead_groups(delta)} == {4}


def test_short_drafts_stay_as_even_as_possible():
    # 3 drafts, 7 tokens, K = 4: one accepted all 4, two rejected the first token -> 4, then 2 + 1 or 1 + 2.
    groups = lookahead_groups(SpecCounters(3, 7, 4, (1, 1, 1, 1)))
    assert sorted((k for _, k, n in groups for _ in range(n)), reverse=True) == [4, 2, 1]


@pytest.mark.parametrize("delta, problem", [
    (SpecCounters(10, 20, 12, (6, 5)), "sum"),
    (SpecCounters(10, 20, 11, (5, 6)), "grow"),
    (SpecCounters(10, 30, 5, (5, 0)), "outside"),
    (SpecCounters(10, 12, 10, (5, 5)), "fewer than accepted"),
    (SpecCounters(0, 4, 0, (0, 0)), "without drafts"),
])
def test_inconsistent_deltas_are_named(delta, problem):
    assert problem in delta.problem()
    with pytest.raises(ValueError):
        synthesize(delta, domain="d", target_version="t", draft_version="x")


def open_store(tmp_path) -> Store:
    return Store.open(f"sqlite:///{tmp_path / 'h.db'}", clock=lambda: T0, backfill=True)


def stored(tmp_path, by=("domain",)) -> list[dict]:
    with open_store(tmp_path) as store:
        return store.stats(StatsQuery(until=T0 + 3600, by=by)).rows


def test_two_pages_store_exact_delta_sums(tmp_path):
    store = open_store(tmp_path)
    scraper = Scraper(StoreSink(store), domain="chat", pod="engine-0", clock=lambda: T0)
    first = scraper.observe_page(page(1))
    assert first.records == 0 and "baseline" in first.notes[0]
    assert scraper.observe_page(page(2)).records == 300
    store.close()
    [row] = stored(tmp_path)
    assert (row["domain"], row["steps"], row["drafted"], row["accepted"]) == ("chat", 300, 1200, 680)
    positions = stored(tmp_path, ("position",))
    assert [(r["position"], r["reached"], r["accepted"]) for r in positions] == [
        (1, 300, 250), (2, 250, 200), (3, 200, 145), (4, 145, 85)]
    with open_store(tmp_path) as store:
        assert {(v.role, v.version) for v in store.versions()} == {("target", MODEL), ("draft", "unknown")}


class Collect:
    def __init__(self):
        self.batches = []

    def write(self, records):
        self.batches.append(list(records))


def test_an_engine_restart_counts_from_the_restart():
    sink = Collect()
    scraper = Scraper(sink, domain="chat", target_version="v2", draft_version="d1", clock=lambda: T0)
    for n in (1, 2, 3):
        result = scraper.observe_page(page(n))
    assert "restarted" in result.notes[0]
    check_exact(sink.batches[-1], SpecCounters(40, 160, 76, (30, 22, 15, 9)))
    assert {r.target_version for r in sink.batches[-1]} == {"v2"}


def test_a_counter_that_goes_down_is_a_restart_without_created_samples():
    def strip(text):  # multiprocess mode: no _created samples
        return "\n".join(line for line in text.splitlines() if "_created" not in line)
    sink = Collect()
    scraper = Scraper(sink, domain="chat")
    for n in (2, 3):
        scraper.observe_page(strip(page(n)))
    assert len(sink.batches) == 1 and len(sink.batches[0]) == 40


def set_counter(text: str, name: str, value: int, position: int | None = None) -> str:
    where = f',position="{position}"' if position is not None else ""
    pattern = rf'(vllm:spec_decode_num_{name}_total\{{[^}}]*model_name="[^"]*"{re.escape(where)}\}}) \S+'
    out, n = re.subn(pattern, rf"\g<1> {value}.0", text)
    assert n == 1
    return out


def test_a_page_caught_mid_update_is_held_until_consistent():
    sink = Collect()
    scraper = Scraper(sink, domain="chat")
    scraper.observe_page(page(1))
    partial = set_counter(page(2), "accepted_tokens_per_pos", 355, position=3)  # the last counter not yet added
    held = scraper.observe_page(partial)
    assert held.records == 0 and "held" in held.notes[0]
    assert scraper.observe_page(page(2)).records == 300
    check_exact(sink.batches[0], SpecCounters(300, 1200, 680, (250, 200, 145, 85)))


def test_counts_that_never_become_consistent_are_dropped_after_max_held():
    sink = Collect()
    scraper = Scraper(sink, domain="chat", max_held=2)
    scraper.observe_page(page(1))
    broken = set_counter(page(2), "accepted_tokens", 9999)
    notes = [scraper.observe_page(broken).notes[0] for _ in range(3)]
    assert ["held" in n for n in notes] == [True, True, False] and "re-baselined" in notes[2]
    assert sink.batches == []


def test_an_engine_that_starts_after_the_first_scrape_is_counted_from_its_start():
    second = page(3).replace('engine="0"', 'engine="1"')  # created after T0 - 1000
    sink = Collect()
    scraper = Scraper(sink, domain="chat", clock=lambda: 1718000500.0)
    scraper.observe_page(page(1))
    scraper.observe_page(page(1) + second)
    assert [len(b) for b in sink.batches] == [40]


def test_a_failed_write_keeps_the_baseline():
    class Failing(Collect):
        fail = True

        def write(self, records):
            if self.fail:
                raise OSError("down")
            super().write(records)
    sink = Failing()
    scraper = Scraper(sink, domain="chat")
    scraper.observe_page(page(1))
    with pytest.raises(OSError):
        scraper.observe_page(page(2))
    sink.fail = False
    assert scraper.observe_page(page(2)).records == 300


def test_a_page_without_spec_decode_metrics_is_a_clear_error():
    plain = "\n".join(line for line in page(1).splitlines() if "spec_decode" not in line)
    with pytest.raises(PageError, match="no vLLM speculative-decoding metrics"):
        parse_page(plain)
    partial = "\n".join(line for line in page(1).splitlines() if "per_pos" not in line)
    with pytest.raises(PageError, match="lacks vllm:spec_decode_num_accepted_tokens_per_pos"):
        parse_page(partial)
    with pytest.raises(PageError, match="not a Prometheus text page"):
        parse_page("<html>502 Bad Gateway</html>")
