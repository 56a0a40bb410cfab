"""Prompt lookup steered by specwatch inside transformers' generate(), on the tiny kit's models (their greedy
output repeats itself, so the lookup finds n-grams) and on the real pretrained model: output identical to plain
greedy generate, the lookup is transformers' own, K follows Sidecar.decide and caps what each step drafts,
K = 0 steps look nothing up, and the records add up and reach the store. Sampling exactness is in
test_hf_sampling.py."""

from __future__ import annotations

import math

import pytest
import torch
from hf_helpers import Emitted, Inputs, Scripted, assert_capped, assert_streamed
from test_hf_generate import TOKENS, greedy, prompts
from transformers.generation.candidate_generator import PromptLookupCandidateGenerator

from agent.hf import LOOKUP_VERSION, Steering, in_process, specwatch_generate
from agent.hub.sidecar import Sidecar
from policies.registry import make
from specwatch_core.records import drafted_of
from storage import StatsQuery, Store

SCRIPT = [3, 0, 5, 1, 0, 0, 2, 8, 4]

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def store(tmp_path):
    with Store.open(f"sqlite:///{tmp_path / 'lookup.db'}") as s:
        yield s


def lookup(target, sidecar, domain, ids, **kwargs):
    return specwatch_generate(target, None, sidecar, domain, prompt_lookup=True, input_ids=ids,
                              max_new_tokens=TOKENS, do_sample=False, **kwargs)


@pytest.mark.parametrize("policy", ["confidence-stop+switch", "heuristic+switch", "fixed:0", "fixed:8"])
def test_greedy_output_is_plain_generate_output(tiny_kit, store, policy):
    sidecar = Sidecar(store, make(policy, 8, 0))
    drafted = accepted = 0
    for target in (tiny_kit.target_v1, tiny_kit.target_v2):
        for domain, ids in prompts(tiny_kit):
            steps = []
            out = lookup(target, sidecar, domain, ids, on_step=steps.append)
            assert torch.equal(out, greedy(target, ids)), (policy, domain)
            drafted += sum(drafted_of(s) for s in steps)
            accepted += sum(s.accepted for s in steps)
    # Exactness means something only where the lookup drafted and the target kept some of it.
    assert (drafted > 0 and accepted > 0) == (policy != "fixed:0")


@pytest.mark.parametrize("ngram", [1, 3])
def test_at_a_fixed_cap_the_steps_are_transformers_own_prompt_lookups(tiny_kit, store, ngram):
    target = tiny_kit.target_v1
    for domain, ids in prompts(tiny_kit):
        ours, theirs = Emitted(), Emitted()
        steered = lookup(target, Scripted(store, [5]), domain, ids, streamer=ours, max_matching_ngram_size=ngram)
        own = greedy(target, ids, prompt_lookup_num_tokens=5, max_matching_ngram_size=ngram, streamer=theirs)
        assert torch.equal(steered, own)
        assert ours.puts == theirs.puts  # the same tokens kept at every step


def test_records_add_up_and_k_follows_decide(tiny_kit, store):
    sidecar = Scripted(store, SCRIPT)
    inputs = Inputs(tiny_kit.target_v1)
    kinds = set()
    try:
        for domain, ids in prompts(tiny_kit, 3):
            streamer, steps = Emitted(), []
            asked_before, inputs_before = len(sidecar.asked), len(inputs.lengths)
            out = lookup(tiny_kit.target_v1, sidecar, domain, ids, streamer=streamer, on_step=steps.append,
                         request_id="req-7")
            assert out.shape[1] - ids.shape[1] == TOKENS
            assert_streamed(steps, streamer, ids.shape[1], TOKENS)
            # One decision per step, and K (cut where the budget ends) caps what the step drafts.
            assert_capped(sidecar.asked[asked_before:], steps, TOKENS)
            for s in steps:
                drafted = drafted_of(s)
                assert 0 <= s.accepted <= drafted <= s.lookahead
                if drafted == s.lookahead:  # positions known: the mask and p(token) per position
                    assert s.drafted is None
                    assert s.accepted_mask == [1] * s.accepted + [0] * (s.lookahead - s.accepted)
                    assert len(s.expected_acceptance) == s.lookahead
                    assert all(0.0 <= e <= 1.0 for e in s.expected_acceptance)
                else:  # fewer than K: sums only
                    assert s.drafted == drafted
                    assert s.accepted_mask is None and s.expected_acceptance is None
                assert s.draft_confidence is None
                assert s.draft_seconds >= 0 and s.verify_seconds > 0
                kinds.add("full" if drafted == s.lookahead > 0 else "short" if drafted else
                          "none" if s.lookahead else "off")
            # The target verified exactly what each step drafted: the prompt with the first step's draft, then
            # the last kept token with the step's draft.
            lengths = inputs.lengths[inputs_before:]
            assert lengths == [ids.shape[1] + drafted_of(steps[0])] + [drafted_of(s) + 1 for s in steps[1:]]
            assert {(s.domain, s.target_version, s.draft_version, s.request_id) for s in steps} == {
                (domain, tiny_kit.versions["target-v1"], LOOKUP_VERSION, "req-7")}
    finally:
        inputs.close()
    # Steps that drafted all K, fewer (a short match), none (no match), and K = 0 steps all occurred.
    assert kinds == {"full", "short", "none", "off"}


def test_expected_acceptance_is_the_targets_probability_of_each_looked_up_token(tiny_kit, store):
    target, checked = tiny_kit.target_v1, 0
    for domain, ids in prompts(tiny_kit):
        steps = []
        out = lookup(target, Scripted(store, [4, 2]), domain, ids, on_step=steps.append)
        with torch.inference_mode():
            probs = torch.softmax(target(out).logits[0].float(), dim=-1)  # probs[i]: of token i + 1
        at = ids.shape[1]  # where the step's first drafted token stands in the output
        for s in steps:
            if s.expected_acceptance:  # an accepted token is in the output: p of it, where it was drafted
                for i in range(s.accepted):
                    assert s.expected_acceptance[i] == pytest.approx(float(probs[at + i - 1, out[0, at + i]]),
                                                                     abs=1e-5)
                    checked += 1
            at += s.emitted
    assert checked > 20


def test_k_0_steps_look_nothing_up(tiny_kit, store, monkeypatch):
    looked_up = []
    own = PromptLookupCandidateGenerator.get_candidates

    def counting(self, input_ids, **kwargs):
        looked_up.append(self.num_output_tokens)
        return own(self, input_ids, **kwargs)

    monkeypatch.setattr(PromptLookupCandidateGenerator, "get_candidates", counting)
    for script in ([0], [0, 4]):
        domain, ids = prompts(tiny_kit, 1)[0]
        steps, inputs = [], Inputs(tiny_kit.target_v1)
        try:
            out = lookup(tiny_kit.target_v1, Scripted(store, script), domain, ids, on_step=steps.append)
        finally:
            inputs.close()
        assert torch.equal(out, greedy(tiny_kit.target_v1, ids))
        off = [s for s in steps if s.lookahead == 0]
        assert off and all(drafted_of(s) == s.accepted == 0 and s.emitted == 1 for s in off)
        # The lookup ran on the other steps only, asked for their K; every K = 0 pass verified one token.
        assert looked_up == [s.lookahead for s in steps if s.lookahead]
        assert all(n == 1 for n, s in zip(inputs.lengths[1:], steps[1:]) if s.lookahead == 0)
        looked_up.clear()


def test_records_reach_the_store_and_none_is_refused(tiny_kit, tmp_path):
    seen = []
    with Store.open(f"sqlite:///{tmp_path / 'inline.db'}") as store:  # inline: a refused record raises
        sidecar = Scripted(store, SCRIPT)
        for domain, ids in prompts(tiny_kit):
            steering = Steering(sidecar, None, domain, prompt_lookup=True, on_step=seen.append)
            tiny_kit.target_v2.generate(ids, custom_generate=steering, max_new_tokens=TOKENS, do_sample=False)
        sidecar.flush(math.inf)
        rows = store.stats(StatsQuery(by=("domain", "draft_version"))).rows
    assert sum(r["steps"] for r in rows) == len(seen)
    assert sum(r["drafted"] for r in rows) == sum(drafted_of(s) for s in seen) > 0
    assert sum(r["accepted"] for r in rows) == sum(s.accepted for s in seen) > 0
    assert {(r["domain"], r["draft_version"]) for r in rows} == {(d, LOOKUP_VERSION) for d in tiny_kit.domains}

    # As `specwatch serve` takes them: the ingest worker validates, and counts what it refuses.
    db = f"sqlite:///{tmp_path / 'served.db'}"
    runtime = in_process(db=db, background=True)
    try:
        for domain, ids in prompts(tiny_kit):
            lookup(tiny_kit.target_v1, runtime.sidecar, domain, ids)
    finally:
        runtime.close()
    assert runtime.sidecar.rejected == 0
    with Store.open(db, migrate_schema=False) as store:
        rows = store.stats(StatsQuery(by=("domain",))).rows
    assert round(sum(r["steps"] * r["tokens_per_step"] for r in rows)) == TOKENS * len(prompts(tiny_kit))


def test_the_drafting_mode_is_named_once(tiny_kit, store):
    domain, ids = prompts(tiny_kit, 1)[0]
    sidecar = Scripted(store, [2])
    with pytest.raises(ValueError, match="pass draft=None"):
        Steering(sidecar, tiny_kit.draft, domain, prompt_lookup=True)
    with pytest.raises(ValueError, match="no draft model"):
        specwatch_generate(tiny_kit.target_v1, None, sidecar, domain, input_ids=ids, max_new_tokens=4)
    with pytest.raises(ValueError, match="prompt_lookup_num_tokens"):
        lookup(tiny_kit.target_v1, sidecar, domain, ids, prompt_lookup_num_tokens=4)
    with pytest.raises(ValueError, match="assistant_ensemble_weight"):
        lookup(tiny_kit.target_v1, sidecar, domain, ids, assistant_ensemble_weight=0.5)


NOTE = ("The quarterly review moves to Thursday at ten. Bring the budget figures for the north office, the "
        "hiring plan for the spring, and the list of open support tickets. Maria will present the new "
        "onboarding checklist, and Tom will summarise the customer survey.")


def test_the_real_model_keeps_its_greedy_answer_and_the_lookup_drafts(real_model, store):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(real_model.hf)
    model = AutoModelForCausalLM.from_pretrained(real_model.hf, dtype=torch.float32).eval()
    chat = [{"role": "user", "content": f"Here is a note:\n\n{NOTE}\n\nWrite the note again, unchanged."}]
    ids = tokenizer.apply_chat_template(chat, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    ids = ids["input_ids"]
    steps = []
    out = specwatch_generate(model, None, Scripted(store, [8]), "copy", prompt_lookup=True, input_ids=ids,
                             max_new_tokens=32, do_sample=False, on_step=steps.append)
    plain = model.generate(ids, max_new_tokens=32, do_sample=False)
    assert torch.equal(out, plain)
    assert sum(drafted_of(s) for s in steps) > 0 and sum(s.accepted for s in steps) > 0
    assert sum(s.emitted for s in steps) == out.shape[1] - ids.shape[1]
