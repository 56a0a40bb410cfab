"""bench/hf_generate.py's six-arm run (the real model's arms) on the tiny kit's models, and its report: every
arm decodes every request to the same greedy output, prompt lookup's steered requests reach the one sidecar
from a pod of their own under ``<domain>+lookup``, and the goal compares with the built-in option that is
best over the whole stream."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root: bench/ is not installed

from bench import hf_generate as hg  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def setup_of(kit, requests=(4, 4)) -> hg.Setup:
    def draw(phase: int, rng: random.Random):
        return [(d, rng.choice(kit.prompt_ids(d))) for d in rng.choices(kit.domains, k=requests[phase])]

    return hg.Setup("tiny", kit.target_v1, kit.target_v2, kit.draft, kit.domains, draw, kit.prompt_ids("code")[0],
                    kit.versions, hg.REAL_ARMS)


def test_six_arms_decode_alike_and_lookup_has_its_own_labels(tiny_kit, monkeypatch):
    seen = []
    real_generate = hg.specwatch_generate

    def spy(target, draft, sidecar, domain, **kwargs):
        seen.append((kwargs.get("prompt_lookup", False), domain, sidecar.pod))
        return real_generate(target, draft, sidecar, domain, **kwargs)

    monkeypatch.setattr(hg, "specwatch_generate", spy)
    result = hg.bench(setup_of(tiny_kit), seed=0, background=False, tokens=16, policy="fixed:4", kmax=8,
                      console=Console(quiet=True))
    assert result["mismatched_requests"] == 0
    stream = next(r for r in result["rows"] if r["phase"] == "stream")
    assert all(stream[arm] > 0 for arm in hg.REAL_ARMS)
    lookups = {(d, pod) for lookup, d, pod in seen if lookup}
    drafts = {(d, pod) for lookup, d, pod in seen if not lookup}
    assert lookups and drafts
    assert all(d.endswith(hg.LOOKUP) and pod == "bench-hf-lookup" for d, pod in lookups)
    assert all(not d.endswith(hg.LOOKUP) and pod == "bench-hf" for d, pod in drafts)
    assert set(result["switch"]) == {"specwatch", "specwatch lookup"}


def test_the_goal_is_against_the_stream_best_built_in_not_each_rows(tiny_kit):
    totals = hg.Totals()
    # On the stream, lookup is best (26.7 tok/s against 20 and 16); in code, the heuristic beats it.
    speeds = {"code": {"target only": 10, "hf default": 20, "hf heuristic": 40, "hf lookup": 20, "specwatch": 44,
                       "specwatch lookup": 22},
              "logs": {"target only": 10, "hf default": 20, "hf heuristic": 10, "hf lookup": 40, "specwatch": 30,
                       "specwatch lookup": 40}}
    for domain, by in speeds.items():
        for arm, tps in by.items():
            for phase in hg.PHASES:
                totals.add(arm, phase, domain, 120, 120 / tps)
    setup = setup_of(tiny_kit)
    setup.domains = ["code", "logs"]
    states = {arm: {"code": (True, ""), "logs": (False, "")} for arm in hg.STEERED}
    result = hg.report(setup, totals, 0, states, [])
    assert result["baseline"] == "hf lookup"
    code = next(r for r in result["rows"] if r["phase"] == hg.PHASES[0] and r["domain"] == "code")
    assert code["vs_best"] == pytest.approx(44 / 20 - 1)
    assert code["vs_row_best"] == pytest.approx(44 / 40 - 1)
    stream = next(r for r in result["rows"] if r["phase"] == "stream")
    assert stream["vs_best"] == pytest.approx(stream["specwatch"] / stream["hf lookup"] - 1)
    assert result["goals"]["stale_switched_off"]
