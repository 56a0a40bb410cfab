"""The fleet check: FleetOutlier findings from the fleet's shared history (every pod's rows in one database).

Per domain and target/draft pair, each pod's acceptance at the first drafted position over the last
``window_seconds`` (one-minute buckets) is tested against its peers on the same pair
(alerts/detectors/fleet_outlier.py). The first position is reached by every speculative step whatever its
lookahead, so pods on different K compare fairly; positions come from per-step records (aggregate records of
``specwatch scrape`` carry none, so such pods are not compared).

Version skew: pods serving different pairs are compared only within their pair. When the fleet has stayed
mixed for ``skew_seconds`` after its last version change (a rolling update that stopped half way, a pod left
on an old draft image), every pod off the fleet's pair (the pair most pods serve; on a tie the newest) gets a
FleetOutlier of kind ``version_skew`` per domain, with the gap between its pair's acceptance and the fleet
pair's there.

Every sidecar sharing the database can run the check; each fires only the findings about its own pod, so a
finding is raised once with the pod as its ``pod`` label.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from alerts.detectors.checks import check_count, check_positive
from alerts.detectors.fleet_outlier import Bucket, FleetOutlier, FleetOutlierConfig, PodResult
from alerts.findings import Finding, iso
from storage import StatsQuery

Pair = tuple[str, str]  # target version, draft version


@dataclass(frozen=True)
class FleetConfig:
    """``window_seconds`` of history per evaluation; ``skew_seconds`` a mixed fleet may go without a
    version change before its odd pods are reported; ``positions``: drafted positions counted (1: the first,
    which every step reaches); ``outlier``: the test's settings."""

    window_seconds: float = 1800.0
    skew_seconds: float = 3600.0
    positions: int = 1
    outlier: FleetOutlierConfig = field(default_factory=FleetOutlierConfig)

    def __post_init__(self) -> None:
        check_positive("window_seconds", self.window_seconds)
        check_positive("skew_seconds", self.skew_seconds)
        check_count("positions", self.positions)


@dataclass(frozen=True)
class FleetReport:
    """One evaluation: findings per pod (fire), (pod, domain) back in line with its peers (resolve), the
    pods per pair and every test's result by (domain, pair)."""

    findings: list[tuple[str, Finding]]
    cleared: list[tuple[str, str]]
    pairs: dict[Pair, list[str]]
    results: dict[tuple[str, Pair], list[PodResult]]

    def for_pod(self, pod: str) -> tuple[list[Finding], list[str]]:
        """This pod's findings, and the domains where it is back in line."""
        return [f for p, f in self.findings if p == pod], [d for p, d in self.cleared if p == pod]


class FleetCheck:
    def __init__(self, config: FleetConfig | None = None):
        self.config = config or FleetConfig()

    def run(self, store: Any, now: float) -> FleetReport:
        """Evaluate the fleet from ``store`` (a storage.Store) over the window ending at ``now``."""
        c = self.config
        rows = store.stats(StatsQuery(now - c.window_seconds, now, (
            "domain", "target_version", "draft_version", "pod", "minute", "position"))).rows
        cells: dict[tuple[str, Pair], dict[str, dict[int, list[int]]]] = {}
        latest: dict[str, tuple[int, Pair]] = {}  # pod -> (last minute seen, its pair then)
        for r in rows:
            pair = (r["target_version"], r["draft_version"])
            latest[r["pod"]] = max(latest.get(r["pod"], (-1, pair)), (r["minute"], pair))
            if r["position"] <= c.positions:
                cell = cells.setdefault((r["domain"], pair), {}).setdefault(r["pod"], {}).setdefault(
                    r["minute"], [0, 0])
                cell[0] += r["reached"]
                cell[1] += r["accepted"]
        buckets = {key: {pod: [tuple(v) for v in by_minute.values()] for pod, by_minute in pods.items()}
                   for key, pods in cells.items()}
        pairs: dict[Pair, list[str]] = {}
        for pod, (_, pair) in sorted(latest.items()):
            pairs.setdefault(pair, []).append(pod)
        detector = FleetOutlier(c.outlier)
        tests = sum(len(detector.testable(b)) for b in buckets.values())
        findings, cleared, results = [], [], {}
        for (domain, pair), by_pod in sorted(buckets.items()):
            results[domain, pair] = detector.update(by_pod, tests).results
            for r in results[domain, pair]:
                if r.outlier:
                    findings.append((r.pod, outlier_finding(domain, pair, r, pairs, c.window_seconds)))
                elif r.gap < c.outlier.min_gap / 2:
                    cleared.append((r.pod, domain))
        flagged = {(pod, f.domain) for pod, f in findings}
        for pod, finding in self._skew(store, now, pairs, buckets):
            if (pod, finding.domain) not in flagged:
                findings.append((pod, finding))
        skewed = {(pod, f.domain) for pod, f in findings}
        return FleetReport(findings, [x for x in cleared if x not in skewed], pairs, results)

    def _skew(self, store: Any, now: float, pairs: dict[Pair, list[str]],
              buckets: dict[tuple[str, Pair], dict[str, list[Bucket]]]) -> list[tuple[str, Finding]]:
        if len(pairs) < 2:
            return []
        pods = {p for members in pairs.values() for p in members}
        seen = [v for v in store.versions() if v.pod in pods]
        changed = max((v.first_seen for v in seen), default=now)
        if now - changed < self.config.skew_seconds:
            return []  # a rolling update still moving
        first = {(v.role, v.version): v.first_seen for v in sorted(seen, key=lambda v: -v.first_seen)}
        newest = {pair: max(first.get(("target", pair[0]), 0), first.get(("draft", pair[1]), 0)) for pair in pairs}
        fleet_pair = max(pairs, key=lambda pair: (len(pairs[pair]), newest[pair]))
        out = []
        for pair, members in sorted(pairs.items()):
            if pair == fleet_pair:
                continue
            for domain in sorted({d for d, p in buckets if p == pair}):
                mine, theirs = _rate(buckets.get((domain, pair), {})), _rate(buckets.get((domain, fleet_pair), {}))
                for pod in members:
                    out.append((pod, skew_finding(domain, pod, pair, fleet_pair, pairs, mine, theirs, changed)))
        return out


def _rate(by_pod: dict[str, list[Bucket]]) -> float | None:
    n = sum(b for rows in by_pod.values() for b, _ in rows)
    return sum(a for rows in by_pod.values() for _, a in rows) / n if n else None


def describe_pairs(pairs: dict[Pair, list[str]]) -> str:
    """'t2/d2: 4 pods, t1/d1: 1 pod', most pods first."""
    return ", ".join(f"{t}/{d}: {len(p)} pod{'s' * (len(p) != 1)}"
                     for (t, d), p in sorted(pairs.items(), key=lambda kv: (-len(kv[1]), kv[0])))


def outlier_finding(domain: str, pair: Pair, r: PodResult, pairs: dict[Pair, list[str]],
                    window: float) -> Finding:
    notes = {
        "summary": (f"Pod {r.pod} accepts {r.acceptance:.2f} in {domain} against {r.peers_acceptance:.2f} on "
                    f"its {len(r.peers)} peers with target {pair[0]} and draft {pair[1]}"),
        "description": (f"Acceptance at the first drafted position over the last {window / 60:.0f} minutes: "
                        f"{r.acceptance:.3f} on {r.pod} ({r.positions} steps) against {r.peers_acceptance:.3f} "
                        f"pooled over {', '.join(r.peers)}, a gap of {r.gap:.3f} (z = {r.z:.1f} beyond the "
                        f"tolerated spread between pods, after the dispersion and multiple-comparison "
                        f"corrections)."),
        "kind": "acceptance", "target_version": pair[0], "draft_version": pair[1],
        "pod_acceptance": f"{r.acceptance:.3f}", "peers_acceptance": f"{r.peers_acceptance:.3f}",
        "gap": f"{r.gap:.3f}", "pods_compared": str(len(r.peers) + 1), "peers": ",".join(r.peers),
        "fleet_pairs": describe_pairs(pairs),
        "action": (f"Compare {r.pod} with a peer: its node (GPU errors, throttling), its draft image and "
                   f"weights, its engine flags; drain or restart it on another node."),
    }
    return Finding("FleetOutlier", domain, "warning", notes, "fleet-outlier")


def skew_finding(domain: str, pod: str, pair: Pair, fleet_pair: Pair, pairs: dict[Pair, list[str]],
                 mine: float | None, theirs: float | None, changed: float) -> Finding:
    gap = f"{theirs - mine:.3f}" if mine is not None and theirs is not None else "unknown"
    notes = {
        "summary": (f"Pod {pod} serves target {pair[0]} with draft {pair[1]} while the fleet serves "
                    f"{fleet_pair[0]}/{fleet_pair[1]} ({describe_pairs(pairs)})"),
        "description": (f"The fleet's pods have served different target/draft pairs since their last version "
                        f"change at {iso(changed)}: a rolling update that stopped, or a pod on another image. "
                        f"Acceptance at the first drafted position in {domain}: "
                        f"{'unknown' if mine is None else f'{mine:.3f}'} on {pair[0]}/{pair[1]}, "
                        f"{'unknown' if theirs is None else f'{theirs:.3f}'} on the fleet's pair."),
        "kind": "version_skew", "target_version": pair[0], "draft_version": pair[1],
        "fleet_target_version": fleet_pair[0], "fleet_draft_version": fleet_pair[1],
        "pod_acceptance": "unknown" if mine is None else f"{mine:.3f}",
        "peers_acceptance": "unknown" if theirs is None else f"{theirs:.3f}", "gap": gap,
        "fleet_pairs": describe_pairs(pairs), "changed_at": iso(changed),
        "action": f"Finish or roll back the rollout: {pod} should serve {fleet_pair[0]}/{fleet_pair[1]}.",
    }
    return Finding("FleetOutlier", domain, "warning", notes, "fleet-skew")
