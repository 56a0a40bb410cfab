"""SlidingWindowUCB on seeded synthetic bandits whose true goodput per K is known.

Each statistical test names the broken variant it was checked against (the variant made it fail).
"""

import random
from collections import Counter

import pytest

from policies.base import ArmStats, Outcome
from policies.goodput import expected_emitted, predicted_goodput
from policies.sliding_ucb import SlidingWindowUCB, ucb_indices

# The same world as test_thompson.py (kept local: test modules do not import each other).
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



# --- the index, alone -------------------------------------------------------------------------------------

def test_index_is_scale_free():
    # Guards against an absolute bonus (the same c would explore far too much at 200 tok/s and not at
    # all at 20k tok/s).
    n, e, s = [3, 5], [9.0, 20.0], [0.09, 0.2]
    g, gg = [2 * 100.0 + 120.0, 5 * 100.0], [2 * 100.0 ** 2 + 120.0 ** 2, 5 * 100.0 ** 2]
    slow = ucb_indices(n, e, s, g, gg, horizon=50, c=1.0)
    fast = ucb_indices(n, [x * 100 for x in e], s, [x * 100 for x in g], [x * 1e4 for x in gg], 50, 1.0)
    assert fast == pytest.approx([x * 100 for x in slow])
    assert slow[0] - 100.0 > slow[1] - 100.0 > 0  # fewer steps, wider bonus


def test_index_pools_within_arm_spread_only():
    # Two arms, each perfectly steady but at different goodputs: no noise, so no bonus. Guards
    # against a sigma over all steps, which would count the 100 vs 50 gap as noise.
    n, e, s = [4, 4], [4.0, 2.0], [0.04, 0.04]
    g, gg = [400.0, 200.0], [4 * 100.0 ** 2, 4 * 50.0 ** 2]
    assert ucb_indices(n, e, s, g, gg, horizon=100, c=2.0) == pytest.approx([100.0, 50.0])


def test_index_has_no_bonus_before_a_horizon():
    assert ucb_indices([1, 2], [1.0, 4.0], [0.01, 0.02], [100.0, 250.0], [1e4, 3.25e4], 1, 1.0) == \
        pytest.approx([100.0, 200.0])


def test_window_sums_match_a_recount():
    # Small window and enough steps for several float-drift rebuilds. Guards against running sums that
    # drift from the window's content (checked against a rebuild that forgets to re-add the steps).
    policy, rng = SlidingWindowUCB(kmax=2, window=20, seed=0), random.Random(1)
    for _ in range(20 * 16 * 2 + 7):
        k, accepted = rng.randrange(3), rng.randint(0, 2)
        accepted = min(accepted, k)
        policy.update("d", Outcome(k, accepted, accepted + 1, 0.001 * k, rng.uniform(0.01, 0.02)))
    w = policy._domains["d"]
    assert len(w.steps) == 20
    for k in range(3):
        mine = [(e, s) for kk, e, s in w.steps if kk == k]
        assert w.n[k] == len(mine)
        assert w.e[k] == pytest.approx(sum(e for e, _ in mine))
        assert w.s[k] == pytest.approx(sum(s for _, s in mine))
        assert w.gg[k] == pytest.approx(sum((e / s) ** 2 for e, s in mine))


# --- the policy -------------------------------------------------------------------------------------------

def test_converges_to_the_best_arm_with_small_regret():
    # Checked against argmin instead of argmax (regret ~0.5). Observed regret 0.011-0.024.
    for seed in range(3):
        world, policy = World(PEAK3, seed), SlidingWindowUCB(kmax=KMAX, seed=seed)
        chosen = run(policy, world, 3000)
        assert Counter(chosen[-1000:]).most_common(1)[0][0] == 3
        assert regret(world, chosen) < 0.04
        # Forgetting means every arm is seen again in every window. Guards against a window that never
        # drops steps (or untried arms not coming first).
        for start in range(2000, 3000, 500):
            assert set(chosen[start:start + 500]) == set(range(KMAX + 1))


def test_follows_a_stale_draft_to_k0():
    # After acceptance falls from PEAK3 to 0.1, K=0 takes over within 400 steps: the majority of
    # steps 400..800 after the change are K=0 (observed ~98 %). Checked against window=100000.
    for seed in range(2):
        world, policy = World(PEAK3, seed), SlidingWindowUCB(kmax=KMAX, seed=seed)
        run(policy, world, 2000)
        world.cond = STALE
        after = run(policy, world, 800)
        assert after[400:].count(0) > 200


def test_same_seed_same_choices_and_domains_are_independent():
    a = run(SlidingWindowUCB(kmax=KMAX, seed=7), World(PEAK3, 0), 300, "code")
    b = run(SlidingWindowUCB(kmax=KMAX, seed=7), World(PEAK3, 0), 300, "code")
    c = run(SlidingWindowUCB(kmax=KMAX, seed=8), World(PEAK3, 0), 300, "code")
    assert a == b and a[:KMAX + 1] != c[:KMAX + 1]  # the untried round is the seeded random part
    # Another domain's traffic changes neither this domain's window nor its random stream.
    policy, code, prose = SlidingWindowUCB(kmax=KMAX, seed=7), World(PEAK3, 0), World(STALE, 1)
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
    history = [ArmStats(k, 5000, round(5000 * expected_emitted(PEAK3, k)), 5000 * k * world.draft,
                        5000 * world.verify[k]) for k in range(KMAX + 1)]
    policy = SlidingWindowUCB(kmax=KMAX, seed=0).warm_start("code", history)
    first = policy.choose("code")
    assert first.lookahead == 3 and "not tried" not in first.reason
    assert run(policy, world, 20, "code").count(3) >= 15
    # History is capped so that fresh steps replace it within one window.
    assert len(policy._domains["code"].steps) <= policy.window


def test_reason_and_decision_fields():
    policy = SlidingWindowUCB(kmax=KMAX, seed=0)
    run(policy, World(PEAK3, 0), 50)
    d = policy.choose("d")
    assert d.policy == "sliding-ucb" and d.speculate == (d.lookahead > 0)
    assert d.reason.startswith(f"sliding-ucb: K={d.lookahead} bound ") and "of last 50)" in d.reason


def test_ignores_steps_without_time_or_outside_the_arms():
    policy = SlidingWindowUCB(kmax=2, window=10, seed=0)
    policy.update("d", Outcome(1, 1, 2, 0.0, 0.0)).update("d", Outcome(5, 5, 6, 0.01, 0.02))
    assert "not tried" in policy.choose("d").reason


@pytest.mark.parametrize("kwargs, name", [
    ({"window": 17}, "window"), ({"window": 100.0}, "window"), ({"c": -1}, "c must"),
    ({"c": float("nan")}, "c must"), ({"warm_cap": 0}, "warm_cap"), ({"kmax": 65}, "kmax"),
])
def test_validation(kwargs, name):
    with pytest.raises(ValueError, match=name):
        SlidingWindowUCB(**kwargs)
