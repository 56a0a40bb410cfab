"""``specwatch guard`` on the tiny kit (shipped weights): v1 -> v2 with the current draft flags logs and keeps
code and prose, exits 3, and its JSON is valid; the estimate is scored on the target's own greedy path; the
history, the sample file and the broken estimators the proof must reject."""

from __future__ import annotations

import json
import math
import time

import pytest
import torch
from typer.testing import CliRunner

from agent.cli import _register, app
from agent.decoding.decoder import SpeculativeDecoder
from agent.decoding.sampling import SamplingParams
from agent.guard import estimate as est
from agent.guard.history import current_history
from agent.guard.sample import SampleError, load_sample
from agent.kit import tokenizer
from agent.kit.build import build_kit
from agent.kit.load import load_kit
from history import step
from storage import Store

NOW = time.time()


@pytest.fixture(scope="module")
def kit(tmp_path_factory, one_thread):
    home = tmp_path_factory.mktemp("guard-home")
    build_kit("tiny", home=home, shipped=True)
    return load_kit("tiny", device="cpu", home=home)


@pytest.fixture(scope="module")
def db(kit, tmp_path_factory):
    """History under target v1 with the kit's draft: at K = 4, nine steps in ten accept all four tokens and one
    in ten two (per-token acceptance 1140 / 1170), timed so that c = 0.25 and a verify pass of K = 4 costs 1.4
    plain steps."""
    url = f"sqlite:///{tmp_path_factory.mktemp('guard-db') / 'h.db'}"
    v1, draft = kit.versions["target-v1"], kit.versions["draft"]
    with Store.open(url, backfill=True) as store:
        store.record_versions(v1, draft, ts=NOW - 3000)
        records = []
        for i in range(300):
            for domain in ("code", "prose", "logs"):
                accepted = 4 if i % 10 else 2
                records.append(step(domain, 4, accepted, NOW - 2000 + i, target=v1, draft=draft,
                                    draft_s=4 * 0.0025, verify_s=0.014))
            records.append(step("code", 0, 0, NOW - 2000 + i, target=v1, draft=draft, draft_s=0.0,
                                verify_s=0.010))
        store.write_records(records)
        store.flush(math.inf)
    return url


def run(kit, db, *args):
    _register()
    root = kit.root
    return CliRunner().invoke(app, ["guard", "--target", str(root / "target-v2"), "--draft", str(root / "draft"),
                                    "--prompts", str(root / "prompts.json"), "--db", db, *args])


def proof_holds(report: dict) -> bool:
    """What the issue asks of the kit: logs flagged (off or re-distill), code and prose kept, the gate fails."""
    by = {d["domain"]: d for d in report["domains"]}
    return (by["logs"]["verdict"] in ("off", "redistill") and by["code"]["verdict"] == "keep"
            and by["prose"]["verdict"] == "keep" and report["failed"] == ["logs"])


def test_v1_to_v2_flags_logs_keeps_code_and_prose_and_fails_the_gate(kit, db):
    result = run(kit, db, "--format", "json")
    assert result.exit_code == 3, result.output
    report = json.loads(result.stdout)
    assert proof_holds(report)
    by = {d["domain"]: d for d in report["domains"]}
    assert report["current_target_version"] == kit.versions["target-v1"]
    assert report["cost_source"] == "history" and report["cost_ratio"] == pytest.approx(0.25, rel=1e-6)
    assert by["logs"]["before"] == pytest.approx(1140 / 1170)
    assert by["logs"]["after"] < 0.3 and by["logs"]["drop"] > 0.5 and by["logs"]["K"] == 0
    for domain in ("code", "prose"):
        assert by[domain]["after"] > 0.8 and by[domain]["K"] == 4 and by[domain]["tok/s ratio"] > 1.5


def test_table_and_csv_formats(kit, db):
    table = run(kit, db)
    assert table.exit_code == 3 and "turn off" in table.stdout and "keep speculation" in table.stdout
    csv = run(kit, db, "--format", "csv", "--max-drop", "1", "--min-speedup", "0.5")
    assert csv.exit_code == 0, csv.output  # nothing below a 0.5 bar: the gate passes
    assert csv.stdout.splitlines()[0].startswith("domain,prompts,positions,before,after,drop")
    # logs above a 0.01 bar: no longer off but a drop of about 0.9, which --strict also fails on
    lenient = json.loads(run(kit, db, "--format", "json", "--min-speedup", "0.01").stdout)
    assert {d["domain"]: d["verdict"] for d in lenient["domains"]}["logs"] == "redistill"
    strict = run(kit, db, "--format", "json", "--min-speedup", "0.01", "--strict")
    assert strict.exit_code == 3 and json.loads(strict.stdout)["gate_failed"] == ["logs"]


@pytest.mark.parametrize("broken", ["target-only", "draft-vs-draft", "teacher-forced-prompt"])
def test_broken_estimators_fail_the_proof(kit, db, monkeypatch, broken):
    """Power: each wrong estimator misses the logs drop (or flags code), so the proof's check rejects it."""
    real_continue, real_score = est._continue, est.score_batch

    def draft_path(target, ids, mask, n, params, generator):  # the draft's own continuation and logits
        return real_continue(kit.draft, ids, mask, n, params, generator)

    def prompt_only(target, draft, prompts, new_tokens, params, generator=None, pad_id=0):
        """Teacher-forced on the prompts' own last tokens: the sampled text, not the target's path."""
        x = torch.tensor([p[-new_tokens - 1:] for p in prompts])
        p_logits = target(input_ids=x, use_cache=False).logits[:, :-1]
        q_logits = draft(input_ids=x, use_cache=False).logits[:, :-1]
        accept = (q_logits.argmax(-1) == p_logits.argmax(-1)).float()
        return accept, accept

    if broken == "target-only":  # p against p: what the target alone agrees with itself
        monkeypatch.setattr(est, "score_batch", lambda t, d, *a, **k: real_score(t, t, *a, **k))
    elif broken == "draft-vs-draft":
        monkeypatch.setattr(est, "_continue", draft_path)
        monkeypatch.setattr(est, "score_batch", lambda t, d, *a, **k: real_score(d, d, *a, **k))
    else:
        monkeypatch.setattr(est, "score_batch", prompt_only)
    result = run(kit, db, "--format", "json", "--new-tokens", "16")
    assert result.exit_code in (0, 3), result.output
    assert not proof_holds(json.loads(result.stdout))


def test_the_continuation_is_the_targets_greedy_output_and_batching_changes_nothing(kit):
    prompts = [ids for d in kit.domains for ids in kit.prompt_ids(d)[:2]]
    params = SamplingParams()
    batched, _ = est.score_batch(kit.target_v2, kit.draft, prompts, 24, params)
    alone = torch.cat([est.score_batch(kit.target_v2, kit.draft, [p], 24, params)[0] for p in prompts])
    assert torch.equal(batched, alone)
    ids = torch.full((1, len(prompts[0])), 0)
    ids[0] = torch.tensor(prompts[0])
    _, tokens = est._continue(kit.target_v2, ids, torch.ones_like(ids), 24, params, None)
    plain = SpeculativeDecoder(kit.target_v2, kit.draft).generate(prompts[0], 24, 0).tokens
    assert tokens[0].tolist() == plain


def test_sampled_estimate_is_the_overlap_and_lies_in_0_1(kit):
    prompts = {"logs": kit.prompt_ids("logs")[:2], "code": kit.prompt_ids("code")[:2]}
    found = est.estimate(kit.target_v2, kit.draft, prompts, new_tokens=16, params=SamplingParams(1.0))
    for e in found.values():
        assert e.positions == 32 and 0 <= e.accepted <= e.positions
        assert e.accepted == pytest.approx(e.overlap, rel=1e-5)  # at temperature 1 the two are the same sum
    assert found["logs"].acceptance < found["code"].acceptance


def test_history_acceptance_k_and_cost(kit, db):
    with Store.open(db) as store:
        h = current_history(store, kit.versions["draft"], None, NOW - 86400, NOW, 8)
        unseen = current_history(store, "nope", None, NOW - 86400, NOW, 8)
    assert h.target_version == kit.versions["target-v1"] and set(h.domains) == {"code", "prose", "logs"}
    assert h.domains["code"].lookahead == 4 and h.domains["code"].steps == 600
    assert h.cost.ratio == pytest.approx(0.25) and h.cost.verify[4] == pytest.approx(0.014)
    assert unseen.domains == {} and "never seen" in unseen.note


def test_sample_file_shapes_and_errors(tmp_path):
    obj = tmp_path / "s.json"
    obj.write_text(json.dumps({"code": ["ab", [5, 6]], "logs": []}))
    assert load_sample(obj, tokenizer.encode) == {"code": [tokenizer.encode("ab"), [5, 6]]}
    lines = tmp_path / "s.jsonl"
    lines.write_text('{"domain": "x", "text": "a"}\n\n{"domain": "x", "ids": [7]}\n')
    assert load_sample(lines, tokenizer.encode) == {"x": [tokenizer.encode("a"), [7]]}
    for text, message in (('{"code": [1.5]}', "item 0: a prompt is text"), ('{"domain": 3, "text": "a"}',
                          "line 1: the domain"), ("{}", "no prompts"), ("[1]\n", "line 1: expected an object")):
        obj.write_text(text)
        with pytest.raises(SampleError, match=message):
            load_sample(obj, tokenizer.encode)


def test_without_history_the_step_cost_is_measured_per_k(kit, tmp_path):
    """No history of this draft: the cost comes from agent/decoding/cost_model.py (a verify pass per K, not one target
    step for every K), and the verdicts still hold."""
    empty = f"sqlite:///{tmp_path / 'empty.db'}"
    Store.open(empty).close()
    result = run(kit, empty, "--format", "json", "--kmax", "4")
    report = json.loads(result.stdout)
    assert report["cost_source"] == "measured", result.output
    assert len(report["verify_ratio"]) == 5 and report["verify_ratio"][0] == 1.0
    assert all(r > 0 for r in report["verify_ratio"]) and report["cost_ratio"] > 0
    assert {d["domain"]: d["verdict"] for d in report["domains"]}["code"] != "off"


def _report_over(monkeypatch, before: dict, after: dict):
    """The guard's report for acceptances ``after`` (the estimate) against a history ``before`` (None: no
    history for that domain), at c = 0.25 and a verify of K costing 1 + 0.1 K plain steps."""
    from agent.guard import report as rep
    from agent.guard.history import Before, History
    from policies.goodput import StepCost

    found = {d: est.Estimate(8, 1000, a * 1000, a * 1000) for d, a in after.items()}
    monkeypatch.setattr(rep, "estimate", lambda *a, **k: found)
    history = History("v1", "d", {d: Before(a, 1000, 4, 250) for d, a in before.items() if a is not None}, None)
    cost = StepCost(0.25, tuple(1 + 0.1 * k for k in range(9)))
    return rep.guard(None, None, {d: [[1]] for d in after}, history, cost, versions=("v2", "d"),
                     cost_source="history")


def test_the_gate_fails_only_on_domains_the_update_puts_below_break_even(monkeypatch):
    """json is below break-even before the update and after it: reported, not gated; logs falls below it with
    the update: gated; chat stays above; extract has no history, so nothing says it was below: gated."""
    report = _report_over(monkeypatch, {"json": 0.10, "logs": 0.80, "chat": 0.80, "extract": None},
                          {"json": 0.09, "logs": 0.05, "chat": 0.79, "extract": 0.05})
    assert report.failed == ["extract", "logs"] and report.gate() == ["extract", "logs"]
    assert report.already_off == ["json"]
    rows = {r["domain"]: r for r in report.rows()}
    assert rows["json"]["action"] == "turn off (already below break-even)" and rows["logs"]["action"] == "turn off"
    assert report.to_dict()["already_off"] == ["json"]


def test_the_gate_without_the_before_judgement_would_block_every_rollout(monkeypatch):
    """Power: a no-op update (the same acceptances) on a domain where speculation never paid fails nothing; with
    the history's judgement ignored, it would fail the gate."""
    from agent.guard import report as rep

    report = _report_over(monkeypatch, {"json": 0.10, "chat": 0.80}, {"json": 0.10, "chat": 0.80})
    assert report.gate(strict=True) == []
    monkeypatch.setattr(rep.DomainReport, "broken", property(lambda d: d.verdict.below_break_even))
    assert report.gate() == ["json"]
