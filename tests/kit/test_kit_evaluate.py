import math

import pytest

from agent.kit import tokenizer
from agent.kit.evaluate import (Cost, DomainResult, EvalReport, agreement, bits_per_byte, check_requirements,
                                evaluate, evaluate_kit, predicted_acceptance)


@pytest.fixture(scope="module")
def report(tiny_kit):
    return evaluate_kit(tiny_kit, prompts_per_domain=2, new_tokens=12, cost_calls=10)


def test_report_has_sane_numbers(report, tiny_kit):
    assert {(r.target, r.domain) for r in report.results} == {(t, d) for t in ("v1", "v2")
                                                            for d in ("code", "prose", "logs")}
    for r in report.results:
        assert r.prompts == 2 and r.positions == 2 * 12
        assert 0 < r.drafted and 0 <= r.accepted <= r.drafted
        assert r.emitted == r.accepted + r.steps  # every step adds one target token
        assert 0 <= r.agreed <= r.positions
        assert 0 < r.bits_per_byte < 16 and math.isfinite(r.bits_per_byte)
    assert report.lookahead == 4 and report.new_tokens == 12
    assert set(report.costs) == {"v1", "v2"} and all(c.ratio > 0 for c in report.costs.values())
    assert report.versions["v1"] == tiny_kit.versions["target-v1"]
    names = [c.name for c in report.checks]
    assert any("vs v2" in n and "lower" in n for n in names)
    data = report.to_dict()
    assert data["loss_unit"] == "bits per byte" and len(data["results"]) == 6


def test_a_draft_identical_to_the_target_is_always_accepted(tiny_kit):
    model = tiny_kit.target_v1
    prompts = {"code": tiny_kit.prompts["code"][:1]}
    result = evaluate({"self": model}, model, prompts, lookahead=3, new_tokens=10, cost_calls=5).results[0]
    assert result.acceptance == 1.0 and result.agreement == 1.0
    ids = tokenizer.encode(prompts["code"][0])
    assert agreement(model, model, ids, [tokenizer.OFFSET + 32] * 5) == 5


def test_the_real_draft_is_measured_not_assumed(tiny_kit, report):
    # The tiny draft is barely trained; it cannot agree with target v2 everywhere.
    assert min(r.agreement for r in report.results) < 1.0


def test_bits_per_byte_orders_models(tiny_kit):
    text = tiny_kit.heldout()["logs"]
    trained = bits_per_byte(tiny_kit.target_v1, text, seq_len=64, max_windows=4)
    assert trained < 8.0  # a uniform guess over 259 ids costs 8.02 bits


def test_predicted_acceptance():
    assert predicted_acceptance(1.0, 4) == 1.0
    assert predicted_acceptance(0.0, 4) == 0.0
    assert predicted_acceptance(0.5, 2) == pytest.approx(0.375)
    assert predicted_acceptance(0.9, 0) == 0.0


def cell(target, domain, accepted, drafted=100):
    return DomainResult(target, domain, 1, accepted, drafted, 10, 10 + accepted, 0, 1, None)


def test_requirements_hold_and_fail():
    costs = {"v1": Cost(1.0, 4.0), "v2": Cost(1.0, 4.0)}
    good = EvalReport(4, 64, [cell("v1", "logs", 70), cell("v1", "code", 50), cell("v2", "logs", 30),
                              cell("v2", "code", 48)], costs)
    checks = check_requirements(good, ["v1", "v2"])
    assert [c.holds for c in checks] == [True, True, True, True, True]
    flat = EvalReport(4, 64, [cell("v1", "logs", 55), cell("v1", "code", 50), cell("v2", "logs", 45),
                              cell("v2", "code", 48)], {"v1": Cost(2.0, 4.0)})
    holds = [c.holds for c in check_requirements(flat, ["v1", "v2"])]
    assert holds == [False, False, False, False]
    flat.checks = check_requirements(flat, ["v1", "v2"])
    assert not flat.ok
