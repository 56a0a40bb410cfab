"""ConfidenceStop: the fitted threshold on pairs whose acceptance is a known function of confidence, the stop
callable, which pairs count, the cost-derived weight, and delegation to the base policy."""

from __future__ import annotations

import random

import pytest

from policies import fit
from policies.base import ArmStats, Decision, Outcome, Policy
from policies.confidence import ConfidenceStop


def chain(rng, k, draft=0.1, verify=1.0, junk=0.99):
    """One step of ``k`` drafted tokens, each with confidence c ~ U(0, 1) and accepted with probability c
    (a calibrated draft, as EAGLE-2 reports, arXiv 2406.16858). Tokens after the first rejection were never
    verified; they get confidence ``junk``, which a correct learner ignores."""
    conf, a = [], 0
    while len(conf) < k:
        c = rng.random()
        conf.append(c)
        if rng.random() >= c:
            break
        a += 1
    conf += [junk] * (k - len(conf))
    return Outcome(k, a, a + 1, draft * k, verify, tuple([1] * a + [0] * (k - a)), tuple(conf))


def fitted(seed, k=1, steps=2400, weight=3.0, **world):
    rng, policy = random.Random(seed), ConfidenceStop(kmax=k, seed=seed, weight=weight)
    for _ in range(steps):
        policy.update("d", chain(rng, k, **world))
    return policy


def test_roc_threshold_minimises_fpr_plus_w_fnr():
    # With P(accept | c) = c and c ~ U(0, 1): fnr(t) = t^2, fpr(t) = (1 - t)^2, so the argmin of
    # fpr + w fnr is 1 / (1 + w): .25 for w = 3, .5 for w = 1.
    rng = random.Random(0)
    conf = [rng.random() for _ in range(20000)]
    acc = [int(rng.random() < c) for c in conf]
    assert fit.roc_threshold(conf, acc, 3.0) == pytest.approx(0.25, abs=0.04)
    assert fit.roc_threshold(conf, acc, 1.0) == pytest.approx(0.5, abs=0.04)
    assert fit.roc_threshold(conf, [1] * len(conf)) is None


def test_fitted_threshold_lands_in_range_with_stated_power():
    # Power: over 100 seeds the fit on a 2048-pair window has mean .26, sd .04, so [.15, .38] holds the
    # optimum .25 for ~99% of seeds (we require 18 of 20). Broken variants land there in 0 of 100 seeds:
    # weight ignored (w = 1, optimum .5) and labels inverted (threshold 0).
    inside = [0.15 <= fitted(seed).threshold_of("d") <= 0.38 for seed in range(20)]
    assert sum(inside) >= 18
    assert sum(0.15 <= fitted(seed, weight=1.0).threshold_of("d") <= 0.38 for seed in range(5)) == 0


def test_only_positions_up_to_the_first_rejection_count():
    # The tail after a rejection (never verified, confidence .99 here) is no evidence: counted as rejected
    # it would swamp the negatives with confident tokens and drive the threshold toward 0. Measured
    # .19-.32 over 20 seeds with chains of 4.
    thresholds = [fitted(seed, k=4, steps=1400).threshold_of("d") for seed in range(5)]
    assert all(0.15 <= t <= 0.38 for t in thresholds)


def test_stop_callable_reads_the_current_threshold():
    # Guards stop semantics (True below the threshold) and that a callable handed out before a refit
    # follows the refit (a decoder keeps it for a whole generation).
    rng, policy = random.Random(1), ConfidenceStop(kmax=1, seed=1)
    stop = policy.stop_drafting("d")
    assert policy.threshold_of("d") == 0.4  # transformers' default before enough pairs
    assert stop(0.3, 1) and not stop(0.5, 1)
    for _ in range(2400):
        policy.update("d", chain(rng, 1))
    t = policy.threshold_of("d")
    assert 0.15 <= t <= 0.38
    assert stop(t - 0.05, 1) and not stop(t + 0.05, 1) and not stop(0.39, 2)


def test_threshold_waits_for_enough_pairs_of_both_kinds():
    # Guards min_pairs: accepted tokens at confidence .9 and rejected ones at .8 separate perfectly at .9,
    # but not before 200 pairs are in.
    policy = ConfidenceStop(kmax=2, seed=0, refit_every=50)
    for i in range(210):
        ok = i % 2
        policy.update("d", Outcome(1, ok, ok + 1, 0.1, 1.0, (ok,), (0.9 if ok else 0.8,)))
        if i == 198:
            assert policy.threshold_of("d") == 0.4
    assert policy.threshold_of("d") == pytest.approx(0.9)
    for _ in range(500):  # only accepted pairs: no threshold is identifiable
        policy.update("e", Outcome(1, 1, 2, 0.1, 1.0, (1,), (0.2,)))
    assert policy.threshold_of("e") == 0.4


def test_cost_derived_weight_follows_the_draft_cost():
    # Guards weight=None: cheap drafts (0.05 s a token against a 1 s verify) make a missed token dear, so
    # w ~ 5 and the threshold ~ 1 / (1 + w) ~ .17; dear drafts (0.4 s) give w ~ .7 and ~ .59. A fixed w
    # would give the same threshold for both.
    cheap = fitted(0, k=4, steps=1400, weight=None, draft=0.05)
    dear = fitted(0, k=4, steps=1400, weight=None, draft=0.4)
    assert cheap.cost_weight("d") > 3.0 > 1.0 > dear.cost_weight("d")
    assert cheap.threshold_of("d") < 0.25 < 0.45 < dear.threshold_of("d")
    for p in (cheap, dear):
        assert p.threshold_of("d") == pytest.approx(1 / (1 + p.cost_weight("d")), abs=0.08)


class Recorder(Policy):
    name = "recorder"

    def __init__(self):
        super().__init__(kmax=6)
        self.updates, self.history = 0, None

    def choose(self, domain):
        return self.decision(3, "base says 3")

    def update(self, domain, outcome):
        self.updates += 1
        return self

    def warm_start(self, domain, history):
        self.history = history
        return self

    def stop_drafting(self, domain):
        return lambda confidence, position: position >= 2


def test_delegates_lookahead_updates_and_warm_start_to_the_base():
    # Guards the wrapper: K and reason from the base, every update and warm start forwarded, and the
    # base's own stop rule kept.
    base = Recorder()
    policy = ConfidenceStop(base, seed=0)
    d = policy.choose("d")
    assert isinstance(d, Decision) and d.lookahead == 3 and d.policy == "confidence-stop"
    assert d.reason.startswith("base says 3; stop drafting below confidence 0.40")
    assert policy.kmax == 6
    policy.update("d", Outcome(3, 1, 2, 0.3, 1.0, (1, 0, 0), (0.9, 0.2, 0.8)))
    assert base.updates == 1
    history = [ArmStats(3, 10, 20, 1.0, 5.0)]
    assert policy.warm_start("d", history) is policy and base.history == history
    stop = policy.stop_drafting("d")
    assert stop(0.1, 1) and stop(0.9, 2) and not stop(0.9, 1)  # either rule stops


def test_without_a_base_it_drafts_kmax():
    # Guards the no-base default: draft up to kmax and let the threshold end the step.
    d = ConfidenceStop(kmax=5, seed=0).choose("d")
    assert d.lookahead == 5 and d.speculate and "K=5" in d.reason


@pytest.mark.parametrize("kwargs, field", [({"weight": 0.0}, "weight"), ({"threshold": 1.5}, "threshold"),
                                          ({"window": 10, "min_pairs": 20}, "min_pairs"),
                                          ({"refit_every": 0}, "refit_every"), ({"halflife": -1}, "halflife")])
def test_bad_parameters_are_named(kwargs, field):
    with pytest.raises(ValueError, match=field):
        ConfidenceStop(**kwargs)
