"""Warm start across a fleet sharing one database: a pod takes its peers' history of the same target/draft
pair (and only of that pair), on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from agent.hub.warm import arm_history, stored_history
from history import T0, step
from storage import Store, StoreConfig

NOW = T0 + 3600


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fleet.db'}"
    schema = request.getfixturevalue("schema")
    return f"postgresql+psycopg://postgres@127.0.0.1:5432/test?options=-csearch_path%3D{schema}"


def open_pod(url: str, pod: str) -> Store:
    return Store.open(url, StoreConfig(pod=pod, max_past_seconds=86400), clock=lambda: NOW, backfill=True)


def test_a_restarted_pod_warm_starts_from_another_pods_history_of_the_same_pair(url):
    with open_pod(url, "pod-a") as a:
        a.record_versions("t2", "d2", ts=T0)
        a.write_records([step("code", 4, 3, T0 + i, target="t2", draft="d2") for i in range(20)])
        # the same target with another draft (a pod that kept the stale draft): not the pair
        a.write_records([step("code", 4, 0, T0 + i, target="t2", draft="d1", pod="pod-c") for i in range(30)])
        a.write_records([step("code", 2, 2, T0 + i, target="t1", draft="d2", pod="pod-c") for i in range(30)])
        a.flush(now=NOW)
    with open_pod(url, "pod-b") as b:  # restarted: its versions are known, its own steps are not stored
        b.record_versions("t2", "d2", ts=T0 + 1800)
        found = stored_history(b, "pod-b", NOW, lookback=3600)
        (arm,) = found["code"][0]
        assert (arm.lookahead, arm.steps) == (4, 20)  # pod-a's steps on t2/d2 only
        assert arm.reached == (20, 20, 20, 20) and arm.accepted == (20, 20, 20, 0)
        # without a draft, every draft of the target counts (both pods' K = 4 rows, merged)
        (merged,) = arm_history(b, "t2", since=T0 - 60, now=NOW)["code"]
        assert merged.steps == 50 and merged.accepted[0] == 20


def test_pods_on_different_pairs_warm_start_apart(url):
    with open_pod(url, "pod-a") as a:
        a.write_records([step("chat", 4, 4, T0 + i, target="t2", draft="d2", pod="pod-a") for i in range(10)])
        a.write_records([step("chat", 4, 1, T0 + i, target="t2", draft="d1", pod="pod-b") for i in range(10)])
        a.flush(now=NOW)
        for draft, accepted in (("d2", (10, 10, 10, 10)), ("d1", (10, 0, 0, 0))):
            (arm,) = arm_history(a, "t2", draft, since=T0 - 60, now=NOW)["chat"]
            assert arm.steps == 10 and arm.accepted == accepted
