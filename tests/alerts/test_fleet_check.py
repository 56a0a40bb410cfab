"""The fleet check through the Store on SQLite and PostgreSQL: a fleet's per-step records (synthetic traces,
tests/alerts/fleet_traces.py) written by pod, then FleetCheck and the sidecar's fleet job. A planted outlier
is named with its pair and gap; a fleet without one gives no finding; pods on different pairs are compared
only within their pair, and a skew that outlasts ``skew_seconds`` names the odd pod."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
import sqlalchemy as sa

import fleet_traces as ft
from agent.runtime.fleet import check_fleet
from alerts.config import AlertConfig
from alerts.fleet import FleetCheck
from alerts.manager import AlertManager
from specwatch_core.records import StepRecord
from storage import Store, StoreConfig

PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
T0 = 1_700_000_000 - 1_700_000_000 % 3600
NOW = T0 + 1800
PODS = ("llm-a", "llm-b", "llm-c", "llm-d")


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'fleet.db'}"
    else:
        admin = sa.create_engine(PG, isolation_level="AUTOCOMMIT")
        schema = f"sw_fleet_{uuid.uuid4().hex[:10]}"
        try:
            with admin.connect() as conn:
                conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        except sa.exc.OperationalError:
            pytest.skip(f"PostgreSQL is not reachable at {PG}")
        url = f"{PG}?options=-csearch_path%3D{schema}"
    s = Store.open(url, StoreConfig(pod="llm-a", max_past_seconds=86400), clock=lambda: NOW, backfill=True)
    yield s
    s.close(flush=False)
    if request.param == "postgresql":
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def records(pod: str, buckets: list[tuple[int, int]], pair=("t1", "d1"), domain: str = "logs") -> list[StepRecord]:
    """Per-step records (K = 2) of one pod: bucket i's steps in minute i, first position accepted k of n."""
    out = []
    for minute, (n, k) in enumerate(buckets):
        for j in range(n):
            first = j < k
            out.append(StepRecord(domain=domain, lookahead=2, accepted=int(first), emitted=int(first) + 1,
                                  draft_seconds=0.002, verify_seconds=0.01, target_version=pair[0],
                                  draft_version=pair[1], accepted_mask=[int(first), 0],
                                  timestamp=T0 + 60 * minute + 60 * j / n, pod=pod))
    return out


def write(store: Store, fleet: dict[str, list], pairs: dict[str, tuple[str, str]] | None = None,
          changed: float = T0 - 7200) -> None:
    for pod, buckets in fleet.items():
        pair = (pairs or {}).get(pod, ("t1", "d1"))
        store.record_versions(*pair, ts=changed, pod=pod)
        store.write_records(records(pod, buckets, pair))
    store.flush(now=NOW)


def test_a_planted_outlier_is_named_with_pair_and_gap(store):
    rng = np.random.default_rng(11)
    write(store, ft.fleet(rng, {"llm-a": 0.7, "llm-b": 0.7, "llm-c": 0.7, "llm-d": 0.45}, spread=0.01))
    report = FleetCheck().run(store, NOW)
    [(pod, finding)] = report.findings
    notes = finding.annotations
    assert (pod, finding.alertname, finding.domain) == ("llm-d", "FleetOutlier", "logs")
    assert (notes["kind"], notes["target_version"], notes["draft_version"]) == ("acceptance", "t1", "d1")
    assert 0.18 < float(notes["gap"]) < 0.32 and notes["pods_compared"] == "4"
    assert notes["peers"] == "llm-a,llm-b,llm-c" and "llm-d" in notes["summary"]
    assert report.for_pod("llm-a") == ([], ["logs"])


def test_no_finding_without_an_outlier(store):
    write(store, ft.fleet(np.random.default_rng(12), {p: 0.6 for p in PODS}))
    report = FleetCheck().run(store, NOW)
    assert report.findings == [] and len(report.results["logs", ("t1", "d1")]) == 4


@pytest.mark.parametrize("updated_ago", [600, 7200])
def test_pods_are_compared_only_within_their_pair_and_a_stalled_skew_names_the_odd_pod(store, updated_ago):
    # three pods updated to t2/d2 (acceptance lower on the new pair); one left on t1/d1
    means = {"llm-a": 0.5, "llm-b": 0.5, "llm-c": 0.5, "llm-d": 0.75}
    pairs = {"llm-a": ("t2", "d2"), "llm-b": ("t2", "d2"), "llm-c": ("t2", "d2")}
    write(store, ft.fleet(np.random.default_rng(13), means, spread=0), pairs, changed=NOW - updated_ago)
    report = FleetCheck().run(store, NOW)
    assert report.pairs == {("t2", "d2"): ["llm-a", "llm-b", "llm-c"], ("t1", "d1"): ["llm-d"]}
    assert all(not r.outlier for results in report.results.values() for r in results)
    if updated_ago < FleetCheck().config.skew_seconds:
        assert report.findings == []  # a rolling update still moving: nobody is named
        return
    [(pod, finding)] = report.findings  # mixed for two hours: the rollout stopped
    notes = finding.annotations
    assert (pod, notes["kind"], notes["target_version"], notes["fleet_target_version"]) == (
        "llm-d", "version_skew", "t1", "t2")
    assert notes["fleet_pairs"] == "t2/d2: 3 pods, t1/d1: 1 pod"
    assert -0.35 < float(notes["gap"]) < -0.15  # the odd pod's old pair accepts more here


def test_the_fleet_job_fires_only_for_its_own_pod(store):
    write(store, ft.fleet(np.random.default_rng(14), {"llm-a": 0.7, "llm-b": 0.7, "llm-c": 0.7, "llm-d": 0.4},
                          spread=0.01))

    class Pod:
        def __init__(self, pod):
            self.pod, self.store = pod, store
            self.alerts = AlertManager([], pod=pod, config=AlertConfig(), clock=lambda: NOW)

    odd, peer = Pod("llm-d"), Pod("llm-a")
    assert check_fleet(odd, FleetCheck(), NOW) == 1 and check_fleet(peer, FleetCheck(), NOW) == 0
    odd.alerts.tick(NOW)
    [alert] = odd.alerts.firing()
    assert alert.labels == {"alertname": "FleetOutlier", "domain": "logs", "severity": "warning", "pod": "llm-d"}
    assert alert.annotations["detector"] == "fleet-outlier"
