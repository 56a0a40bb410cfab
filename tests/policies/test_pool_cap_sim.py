"""pool-cap on simulated pools whose K is a cap (bench/ngram_world.py): off at 40 tok/s, n-gram pools capped
at 8, 24 and 64 (k64 the default pool) drafting 0..K a step as each domain's text allows, a draft-model pool
drafting exactly 4; three domains whose best pools differ (code k64, logs k8, chat the draft model), 200
requests each, interleaved. Each domain must get >= 95% of its best fixed pool's tokens/s over its 200
requests and >= 90% over its first 20, as the mean over 16 seeds (each share on the same requests as the
fixed pools').

Power (bench/pool_cap_sim.py, the same 16 seeds): pool-cap passes every domain (means 96.5 / 98.4 / 98.0%
over 200, 92.3 / 91.1 / 95.5% over the first 20; seeds meeting >= 95%: 13, 16, 15 of 16; >= 90% over the
first 20: 12, 11, 16). The deliberately broken variant that shares a pool's seconds per step across domains
without the drafted term fails logs, where k64 drafts 15 tokens a step against code's 7 (94.2% over 200,
6 of 16 seeds; 87.2% over the first 20, 3 of 16), and pool-model (Leviathan's tokens at K = the cap, the
default before) fails every domain (84.6 / 90.4 / 88.1%, no seed meeting >= 95%)."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root: bench/ is not installed

from bench.pool_cap_sim import GOALS, evaluate  # noqa: E402

SEEDS = range(16)


@functools.cache
def scores(name: str) -> dict[str, dict]:
    return evaluate(name, SEEDS)


def failures(name: str) -> list[str]:
    """Domain and part (all 200 requests, first 20) whose mean share over the seeds misses its goal."""
    return [f"{d} {part} {s[part]['mean']:.3f}" for d, s in scores(name).items()
            for part, goal in zip(("all", "first"), GOALS) if s[part]["mean"] < goal]


def test_pool_cap_reaches_the_best_pool_of_every_domain():
    assert failures("pool-cap") == []


def test_behind_the_switch_it_loses_nothing():
    assert scores("pool-cap+switch") == scores("pool-cap")


def test_a_cost_per_step_without_the_drafted_term_fails_the_same_check():
    missed = failures("no-drafted-term")
    assert any(m.startswith("logs all") for m in missed), missed


def test_the_previous_default_fails_the_same_check():
    assert len({m.split()[0] for m in failures("pool-model+switch")}) == 3
