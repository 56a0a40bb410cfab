"""Many pods, one database: each pod's Store writes its own rows; stats answers per pod and for the fleet
(the sums of the pods), also per target/draft pair."""

from __future__ import annotations

from history import T0, step
from storage import StatsQuery, Store, StoreConfig


def test_two_pods_per_pod_and_fleet_views(db_url, clock):
    stores = [Store.open(db_url, StoreConfig(pod=pod, max_past_seconds=400 * 86400), clock=clock, backfill=True)
              for pod in ("pod-a", "pod-b")]
    try:
        a, b = stores
        a.write_records([step("code", 4, 3, T0 + i) for i in range(30)])
        b.write_records([step("code", 4, 1, T0 + i) for i in range(10)])
        b.write_records([step("code", 4, 0, T0 + i, draft="d2") for i in range(10)])
        for s in stores:
            s.flush(now=T0 + 3600)
        per_pod = {r["pod"]: r for r in a.stats(StatsQuery(T0, T0 + 3600, ("pod",))).rows}
        assert {p: (r["steps"], r["accepted"]) for p, r in per_pod.items()} == {"pod-a": (30, 90), "pod-b": (20, 10)}
        (fleet,) = b.stats(StatsQuery(T0, T0 + 3600, ("domain",))).rows
        assert (fleet["steps"], fleet["drafted"], fleet["accepted"]) == (50, 200, 100)
        assert fleet["acceptance_rate"] == 0.5
        pairs = {(r["pod"], r["draft_version"]): r["steps"]
                 for r in a.stats(StatsQuery(T0, T0 + 3600, ("pod", "draft_version"))).rows}
        assert pairs == {("pod-a", "d1"): 30, ("pod-b", "d1"): 10, ("pod-b", "d2"): 10}
        positions = {(r["pod"], r["position"]): (r["reached"], r["accepted"])
                     for r in a.stats(StatsQuery(T0, T0 + 3600, ("pod", "position"))).rows}
        assert positions["pod-a", 1] == (30, 30) and positions["pod-b", 1] == (20, 10)
    finally:
        for s in stores:
            s.close(flush=False)
