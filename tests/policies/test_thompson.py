"""DiscountedThompson and DiscountedArms on seeded synthetic bandits whose true goodput per K is known.

Each statistical test names the broken variant it was checked against (the variant made it fail).
"""

import math
import random
from collections import Counter

import pytest

from policies.arms import DiscountedArms
from policies.base import ArmStats, Outcome
from policies.goodput import expected_emitted, predicted_goodput
from policies.thompson import DiscountedThompson, goodput_posteriors

KMAX = 8
# Acceptance profile where K=3 is clearly best (101 tok/s; K=4: 94, K=2: 91, K=0: 50).
PEAK3 = [0.95] * 3 + [0.3] * 5
STALE = [0.1] * KMAX  # the draft went stale: K=0 is best (50 tok/s; K=1: 43)


class World:
    """Per-position acceptance ``cond``; draft 5 ms per token, verify 20 ms (+3 % per extra token)."""

    draft, verify = 0.005, [0.02 * (1 + 0.03 * k) for k in range(KMAX + 1)]

    def __init__(self, cond, seed, noise=0.05):
        self.cond, self.noise, self.rng = list(cond), noise, random.Random(seed)

    def goodput(self, k):
        return predicted_goodput(self.cond, k, self.draft, self.verify)

    def best(self):
        return max(range(KMAX + 1), key=self.goodput)

    def step(self, k):
        accepted = 0
        while accepted < k and self.rng.random() < self.cond[accepted]:
            accepted += 1
        f = max(0.2, self.rng.gauss(1.0, self.noise))  # timing noise, mean 1
        return Outcome(k, accepted, accepted + 1, k * self.draft * f, self.verify[k] * f)


def run(policy, world, steps, domain="d"):
    chosen = []
    for _ in range(steps):
        k = policy.choose(domain).lookahead
        policy.update(domain, world.step(k))
        chosen.append(k)
    return chosen


def regret(world, chosen):
    """Mean goodput lost per step against the best fixed K, relative to the best."""
    best = world.goodput(world.best())
    return sum(best - world.goodput(k) for k in chosen) / len(chosen) / best


def test_world_is_what_the_tests_assume():
    assert World(PEAK3, 0).best() == 3 and World(STALE, 0).best() == 0
    assert World(PEAK3, 0).goodput(4) < 0.95 * World(PEAK3, 0).goodput(3)


# --- DiscountedArms -------------------------------------------------------------------------------------

def test_arms_match_explicit_discounting_across_rescales():
    # gamma 0.5 forces the lazy scale past its rescale threshold (~330 steps) several times.
    # Guards against a lazy-weight bug (e.g. not rescaling, or discounting only the pushed arm).
    gamma, rng = 0.5, random.Random(3)
    arms, steps = DiscountedArms(3, gamma), []
    for _ in range(1200):
        k, e, s = rng.randrange(3), rng.randint(1, 4), rng.uniform(0.01, 0.03)
        arms.push(k, e, s)
        steps.append((k, e, s))
    for k in range(3):
        w = [(gamma ** age, e, s) for age, (kk, e, s) in enumerate(reversed(steps)) if kk == k]
        n, se, ss = sum(x for x, _, _ in w), sum(x * e for x, e, _ in w), sum(x * s for x, _, s in w)
        assert arms.count(k) == pytest.approx(n, rel=1e-9)
        assert arms.goodput(k) == pytest.approx(se / ss, rel=1e-9)


def test_arms_goodput_is_a_ratio_of_sums():
    # Guards against a mean of per-step ratios (which would give (1/1 + 3/0.5) / 2 = 3.5).
    arms = DiscountedArms(1, 1.0)
    arms.push(0, 1, 1.0)
    arms.push(0, 3, 0.5)
    assert arms.goodput(0) == pytest.approx(4 / 1.5)


def test_arms_warm_totals_are_capped_and_keep_the_mean():
    arms = DiscountedArms(2, 0.99)
    arms.add_totals(1, steps=100_000, emitted=300_000, seconds=2_000.0, cap=100)
    assert arms.count(1) == pytest.approx(100) and arms.goodput(1) == pytest.approx(150)
    assert arms.residual_var(1) == pytest.approx((0.5 * 3) ** 2)  # the assumed cv 0.5 of emitted


def test_arms_rejects_bad_gamma():
    with pytest.raises(ValueError, match="gamma"):
        DiscountedArms(3, 1.5)


# --- the posterior, alone ---------------------------------------------------------------------------------

def test_posterior_has_a_floor_and_narrows_with_data():
    # Identical steps have zero sample variance; the prior keeps the posterior from being a spike.
    # Guards against dropping the prior term (sd would be 0).
    arms = DiscountedArms(1, 1.0)
    for _ in range(2):
        arms.push(0, 4, 0.04)
    (mean, sd, n), = goodput_posteriors(arms, prior_cv=0.5, prior_weight=1.0)
    assert (mean, n) == (pytest.approx(100), pytest.approx(2))
    assert sd == pytest.approx(0.5 * 100 * math.sqrt(1 / (2 * 3)))
    for _ in range(198):
        arms.push(0, 4, 0.04)
    assert 0 < goodput_posteriors(arms, 0.5, 1.0)[0][1] < sd / 5


def test_posterior_sd_tracks_the_noise():
    rng = random.Random(0)
    quiet, loud = DiscountedArms(1, 1.0), DiscountedArms(1, 1.0)
    for _ in range(400):
        quiet.push(0, 4, 0.04 * rng.gauss(1, 0.01))
        loud.push(0, rng.choice([1, 7]), 0.04)
    assert goodput_posteriors(loud, 0.5, 1.0)[0][1] > 5 * goodput_posteriors(quiet, 0.5, 1.0)[0][1]


# --- the policy -------------------------------------------------------------------------------------------

def test_converges_to_the_best_arm_with_small_regret():
    # Checked against argmin instead of argmax (regret ~0.5) and against a posterior without the
    # 1/sqrt(n) width (locks onto an early lucky arm in some seeds). Observed regret 0.038-0.048.
    for seed in range(3):
        world, policy = World(PEAK3, seed), DiscountedThompson(kmax=KMAX, seed=seed)
        chosen = run(policy, world, 3000)
        assert Counter(chosen[-1000:]).most_common(1)[0][0] == 3
        assert regret(world, chosen) < 0.07


def test_follows_a_stale_draft_to_k0():
    # After acceptance falls from PEAK3 to 0.1, K=0 must take over within 400 steps: the majority of
    # steps 400..800 after the change are K=0 (observed 75-85 %). Checked against gamma=1 (no
    # forgetting), which still mostly speculates there.
    for seed in range(2):
        world, policy = World(PEAK3, seed), DiscountedThompson(kmax=KMAX, seed=seed)
        run(policy, world, 2000)
        world.cond = STALE
        after = run(policy, world, 800)
        assert after[400:].count(0) > 200


def test_untried_arms_come_first_in_seeded_random_order():
    policy = DiscountedThompson(kmax=KMAX, seed=1)
    first = run(policy, World(PEAK3, 1), KMAX + 1)
    assert sorted(first) == list(range(KMAX + 1)) and first != sorted(first)


def test_same_seed_same_choices_and_domains_are_independent():
    a = run(DiscountedThompson(kmax=KMAX, seed=7), World(PEAK3, 0), 300, "code")
    b = run(DiscountedThompson(kmax=KMAX, seed=7), World(PEAK3, 0), 300, "code")
    c = run(DiscountedThompson(kmax=KMAX, seed=8), World(PEAK3, 0), 300, "code")
    assert a == b and a != c
    # Interleaving another domain's traffic changes neither this domain's statistics nor its random
    # stream. Guards against state keyed wrongly or one shared random stream.
    policy, code, prose = DiscountedThompson(kmax=KMAX, seed=7), World(PEAK3, 0), World(STALE, 1)
    mixed = []
    for _ in range(300):
        mixed.append(policy.choose("code").lookahead)
        policy.update("code", code.step(mixed[-1]))
        policy.update("prose", prose.step(policy.choose("prose").lookahead))
    assert mixed == a


def test_warm_start_exploits_history_at_once():
    # History favouring K=3: no cold exploration round, K=3 from the first step. Checked against a
    # warm_start that ignores history (the first 9 choices are then every arm once).
    world = World(PEAK3, 0)
    history = [ArmStats(k, 5000, round(5000 * expected_emitted(PEAK3, k)),
                        5000 * k * world.draft, 5000 * world.verify[k])
               for k in range(KMAX + 1)]
    policy = DiscountedThompson(kmax=KMAX, seed=0).warm_start("code", history)
    first = policy.choose("code")
    assert first.lookahead == 3 and "untried" not in first.reason
    assert run(policy, world, 20, "code").count(3) >= 15


def test_reason_and_decision_fields():
    policy = DiscountedThompson(kmax=KMAX, seed=0)
    run(policy, World(PEAK3, 0), 50)
    d = policy.choose("d")
    assert d.policy == "thompson" and d.speculate == (d.lookahead > 0)
    assert d.reason.startswith(f"thompson: K={d.lookahead} sampled ") and "tok/s (mean " in d.reason


def test_ignores_steps_without_time_or_outside_the_arms():
    policy = DiscountedThompson(kmax=2, seed=0)
    policy.update("d", Outcome(1, 1, 2, 0.0, 0.0)).update("d", Outcome(5, 5, 6, 0.01, 0.02))
    assert "untried" in policy.choose("d").reason


@pytest.mark.parametrize("kwargs, name", [
    ({"gamma": 0.0}, "gamma"), ({"gamma": 1.01}, "gamma"), ({"prior_cv": 0}, "prior_cv"),
    ({"prior_weight": -1}, "prior_weight"), ({"warm_cap": 0}, "warm_cap"), ({"kmax": 0}, "kmax"),
])
def test_validation(kwargs, name):
    with pytest.raises(ValueError, match=name):
        DiscountedThompson(**kwargs)
