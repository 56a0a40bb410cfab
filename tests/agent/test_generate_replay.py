"""`specwatch replay --api generate` against `specwatch serve`'s POST /v1/generate (the app under uvicorn,
tiny random models): every request decoded under the domain the driver chose, every token counted alike."""

from __future__ import annotations

import math
from dataclasses import replace

from test_generate import client_for, model_dirs, models  # noqa: F401 - module fixtures

from agent.workload import tally
from agent.workload.mix import schedule
from agent.workload.prompts import load
from agent.workload.replay import ReplayConfig, replay
from agent.workload.requests import Sampling
from storage import StatsQuery
from tests.proxy.servers import Running


def test_a_replay_through_the_generate_route_is_recorded_per_domain(tmp_path, models):  # noqa: F811
    client, sidecar = client_for(tmp_path, models, "fixed:2")
    # the tiny models take 256 positions: short prompts only, under two domains
    sets = {"chat": load("chat", "heldout"), "talk": [replace(p, domain="talk") for p in load("chat", "train")]}
    with Running(client.app) as served:
        run = replay(ReplayConfig(served.url, schedule("chat=1,talk=1"), api="generate", concurrency=2,
                                  requests=6, sampling=Sampling(max_tokens=6, template="plain")), sets)
    assert [r.error for r in run.results] == [None] * 6 and all(r.tokens == 6 for r in run.results)
    sidecar.flush(math.inf)
    rows = {row["domain"]: row for row in sidecar.store.stats(StatsQuery(by=("domain",))).rows}
    tokens = {row["domain"]: row["tokens"] for row in tally.summary(run)}
    assert set(rows) == {r.domain for r in run.results}
    emitted = {d: round(row["steps"] * row["tokens_per_step"]) for d, row in rows.items()}
    assert emitted == {d: tokens[d] for d in rows}
    sidecar.store.db.dispose()
