"""specwatch inside transformers' generate() on the tiny kit's models: greedy output identical to plain
generate, the records' counts equal what transformers' loop emitted, K follows Sidecar.decide (K = 0 runs
no draft forward), every record reaches the store. Sampling exactness is in test_hf_sampling.py."""

from __future__ import annotations

import math

import pytest
import torch
from hf_helpers import Emitted, Forwards, Scripted, assert_capped, assert_streamed

from agent.hf import Steering, in_process, specwatch_generate
from agent.hub.sidecar import Sidecar
from policies.registry import make
from storage import StatsQuery, Store

TOKENS = 48


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def kit(tiny_kit):
    return tiny_kit


@pytest.fixture
def store(tmp_path):
    with Store.open(f"sqlite:///{tmp_path / 'hf.db'}") as s:
        yield s


def prompts(kit, n=2):
    """(domain, prompt) pairs cut so that TOKENS more fit in the tiny kit's context."""
    room = kit.target_v1.config.max_position_embeddings - TOKENS
    return [(domain, torch.tensor([ids[-room:]])) for domain in kit.domains for ids in kit.prompt_ids(domain)[:n]]


def greedy(model, ids, **kwargs):
    return model.generate(ids, max_new_tokens=TOKENS, do_sample=False, **kwargs)


@pytest.mark.parametrize("policy", ["confidence-stop+switch", "heuristic+switch", "fixed:0", "fixed:8"])
def test_greedy_output_is_plain_generate_output(kit, store, policy):
    sidecar = Sidecar(store, make(policy, 8, 0))
    for target in (kit.target_v1, kit.target_v2):
        for domain, ids in prompts(kit):
            plain = greedy(target, ids)
            steered = specwatch_generate(target, kit.draft, sidecar, domain, input_ids=ids, max_new_tokens=TOKENS,
                                         do_sample=False)
            assisted = greedy(target, ids, assistant_model=kit.draft)  # transformers' own, for comparison
            assert torch.equal(steered, plain), (policy, domain)
            assert torch.equal(assisted, plain)


def test_records_count_what_transformers_emitted_and_k_follows_decide(kit, store):
    script = [3, 0, 5, 1, 0, 0, 2, 8, 4]
    sidecar = Scripted(store, script)
    forwards = Forwards(kit.draft)
    try:
        for domain, ids in prompts(kit, 3):
            streamer = Emitted()
            asked_before, forwards_before = len(sidecar.asked), forwards.count
            steps = []
            out = specwatch_generate(kit.target_v1, kit.draft, sidecar, domain, input_ids=ids, max_new_tokens=TOKENS,
                                     do_sample=False, streamer=streamer, on_step=steps.append)
            assert out.shape[1] - ids.shape[1] == TOKENS
            assert_streamed(steps, streamer, ids.shape[1], TOKENS)
            # One decision per step, and each step drafted what was decided (capped where the budget ends).
            assert_capped(sidecar.asked[asked_before:], steps, TOKENS)
            for s in steps:
                assert s.accepted_mask == [1] * s.accepted + [0] * (s.lookahead - s.accepted)
                assert len(s.expected_acceptance) == len(s.draft_confidence) == s.lookahead
                assert s.draft_seconds >= 0 and s.verify_seconds > 0
            # The draft runs one forward per drafted token and none at all on K = 0 steps.
            assert forwards.count - forwards_before == sum(s.lookahead for s in steps)
            assert any(s.lookahead == 0 for s in steps) and any(s.accepted > 0 for s in steps)
            assert {(s.domain, s.target_version, s.draft_version) for s in steps} == {
                (domain, kit.versions["target-v1"], kit.versions["draft"])}
    finally:
        forwards.close()


def test_the_policy_stop_rule_ends_drafting_after_the_token_it_was_asked_about(kit, store):
    asked = []

    def stop(confidence, position):
        asked.append((position, confidence))
        return position == 2

    domain, ids = prompts(kit, 1)[0]
    steps = []
    out = specwatch_generate(kit.target_v1, kit.draft, Scripted(store, [5], stop), domain, input_ids=ids,
                             max_new_tokens=TOKENS, do_sample=False, on_step=steps.append)
    assert torch.equal(out, greedy(kit.target_v1, ids))
    drafted = [s for s in steps if s.lookahead]
    assert {s.lookahead for s in drafted[:-1]} == {2}  # the last step may have less room
    # Asked once per drafted token, with the draft's probability of it, as the record has it.
    expected = [(i + 1, c) for s in drafted for i, c in enumerate(s.draft_confidence)]
    assert [p for p, _ in asked] == [p for p, _ in expected]
    assert [c for _, c in asked] == pytest.approx([c for _, c in expected], abs=1e-6)


def test_every_step_reaches_the_store(kit, store):
    sidecar = Sidecar(store, make("confidence-stop+switch", 8, 0))
    seen = []
    for domain, ids in prompts(kit):
        steering = Steering(sidecar, kit.draft, domain, on_step=seen.append)
        kit.target_v2.generate(ids, custom_generate=steering, max_new_tokens=TOKENS, do_sample=False)
        assert seen[-len(steering.steps):] == steering.steps
    sidecar.flush(math.inf)
    rows = store.stats(StatsQuery(by=("domain", "target_version"))).rows
    assert sum(r["steps"] for r in rows) == len(seen)
    assert sum(r["accepted"] for r in rows) == sum(s.accepted for s in seen)
    assert {r["target_version"] for r in rows} == {kit.versions["target-v2"]}
    assert {r["domain"] for r in rows} == set(kit.domains)


def test_the_readme_lines_store_every_token(kit, tmp_path):
    db = f"sqlite:///{tmp_path / 'readme.db'}"
    ids = prompts(kit, 1)[0][1]
    runtime = in_process(db=db, pod="readme")
    try:
        out = specwatch_generate(kit.target_v1, kit.draft, runtime.sidecar, domain="code", input_ids=ids,
                                 max_new_tokens=TOKENS)
    finally:
        runtime.close()
    assert torch.equal(out, greedy(kit.target_v1, ids))
    with Store.open(db, migrate_schema=False) as store:
        rows = store.stats(StatsQuery(by=("domain",))).rows
    (row,) = rows
    assert row["domain"] == "code" and round(row["steps"] * row["tokens_per_step"]) == TOKENS


def test_plain_assisted_generate_is_untouched_after_and_beside_steering(kit, store):
    target = kit.target_v1
    ids = prompts(kit, 1)[0][1]
    specwatch_generate(target, kit.draft, Scripted(store, [0]), "code", input_ids=ids, max_new_tokens=8)
    assert "_get_candidate_generator" not in vars(target)
    forwards = Forwards(kit.draft)
    try:
        greedy(target, ids, assistant_model=kit.draft)  # transformers' own generator drafts
    finally:
        forwards.close()
    assert forwards.count > 0


def test_a_draft_with_another_vocabulary_is_refused(kit, store):
    from tiny_models import llama

    other = llama(vocab=32)
    with pytest.raises(ValueError, match="vocabulary size 32"):
        specwatch_generate(kit.target_v1, other, Scripted(store, [2]), "code", input_ids=prompts(kit, 1)[0][1],
                           max_new_tokens=4)
