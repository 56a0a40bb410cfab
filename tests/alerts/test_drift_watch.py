"""DriftWatch on StepRecords: StaleDraft on version changes with a drop (and not without one),
AcceptanceDrift within a version, only verified positions counted, BelowBreakEven, annotations."""

import random

import pytest

from alerts.detectors.sprt import NO_DROP
from alerts.watch import DriftWatch, Finding, WatchConfig
from specwatch_core.records import StepRecord

REQUIRED = ("summary", "description", "acceptance_before", "acceptance_after", "old_target_version",
            "new_target_version", "draft_version", "speedup_lost", "action")


def step(rng, p, k=4, target="t1", draft="d1", domain="logs", values=None, seconds=(0.004, 0.01)):
    """A speculative step with per-token acceptance p (lookahead 0: a plain step)."""
    accepted = 0
    while accepted < k and rng.random() < p:
        accepted += 1
    if values is None and k:
        values = [min(max(rng.gauss(p, 0.08), 0.0), 1.0) for _ in range(k)]
    return StepRecord(domain=domain, lookahead=k, accepted=accepted, emitted=accepted + 1,
                      draft_seconds=seconds[0] * k / 4, verify_seconds=seconds[1], target_version=target,
                      draft_version=draft, accepted_mask=[1] * accepted + [0] * (k - accepted),
                      expected_acceptance=values if k else None, timestamp=1_700_000_000.0)


def run(watch, records):
    return [(i, f) for i, r in enumerate(records) for f in watch.observe(r)]


def versions_stream(seed, before, after, n_before=2000, n_after=2000, new=("t2", "d1"), values=True):
    rng = random.Random(seed)
    out = [step(rng, before) for _ in range(n_before)]
    out += [step(rng, after, target=new[0], draft=new[1]) for _ in range(n_after)]
    if not values:
        out = [StepRecord(**{**r.to_dict(), "expected_acceptance": None}) for r in out]
    return out


@pytest.mark.parametrize("values", [True, False], ids=["expected-acceptance", "flags-only"])
def test_stale_draft_fires_on_a_target_change_with_a_drop(values):
    found = run(DriftWatch(), versions_stream(1, 0.9, 0.4, values=values))
    assert [f.alertname for _, f in found] == ["StaleDraft"]  # no AcceptanceDrift for a version change
    i, finding = found[0]
    assert 2000 <= i <= 2020  # the test decides after at least 30 verified positions
    notes = finding.annotations
    assert all(notes.get(k) for k in REQUIRED), sorted(notes)
    assert (notes["old_target_version"], notes["new_target_version"], notes["draft_version"]) == ("t1", "t2", "d1")
    assert float(notes["acceptance_before"]) == pytest.approx(0.9, abs=0.03)
    assert float(notes["acceptance_after"]) < 0.6
    assert notes["cost_ratio"] == "0.100" and notes["lookahead"] == "4"
    assert float(notes["speedup_lost"].rstrip("x")) > 1.0
    assert "re-distil" in notes["action"] and "speculation off" in notes["action"].replace("Turn s", "s")
    assert finding.detector == "stale-draft" and finding.severity == "warning" and finding.domain == "logs"


def test_no_stale_draft_on_a_version_change_without_a_drop():
    watch = DriftWatch()
    assert run(watch, versions_stream(2, 0.9, 0.9, n_after=6000)) == []
    lineage = watch._domains["logs"].current
    assert lineage.test.decision == NO_DROP and lineage.origin == ("t1", "d1")


@pytest.mark.parametrize("fresh, resolved", [(0.88, True), (0.45, False)], ids=["recovered", "still-stale"])
def test_a_later_pair_that_recovers_resolves_stale_draft(fresh, resolved):
    # 0.9 -> 0.4 on target t2 fires StaleDraft; a re-distilled draft d2 back at 0.88 resolves it, one at 0.45
    # (no drop from the stale level, but no recovery either) must not: "no drop" alone is not a recovery.
    rng = random.Random(7)
    records = versions_stream(7, 0.9, 0.4)
    records += [step(rng, fresh, target="t2", draft="d2") for _ in range(2000)]
    found = run(DriftWatch(), records)
    assert [f.alertname for _, f in found][0] == "StaleDraft" and not found[0][1].resolves
    ends = [(i, f) for i, f in found if f.resolves]
    if not resolved:
        assert ends == []
        return
    (i, end), = ends
    assert 4000 <= i <= 4100 and end.alertname == "StaleDraft" and end.domain == "logs"
    assert end.annotations["resolved_by"] == "target t2, draft d2"


@pytest.mark.parametrize("fresh, resolved", [(0.88, True), (0.45, False), (0.67, False)],
                         ids=["recovered", "still-stale", "barely-half-way"])
def test_a_later_pair_resolves_stale_draft_when_the_stale_pair_was_turned_off_at_once(fresh, resolved):
    # 0.9 -> 0.4 fires StaleDraft, then the domain runs plain steps only (speculation off): the stale pair
    # leaves far fewer than min_baseline positions, so the re-distilled draft d2 cannot be tested against it
    # and is judged on its own. At 0.88 it resolves; at 0.45 it must not; at 0.67 (half way is 0.65) its mean
    # is over the line but its lower confidence bound, after 2000 steps, is not.
    rng = random.Random(11)
    records = versions_stream(11, 0.9, 0.4, n_after=40)
    records += [step(rng, 0.4, k=0, target="t2") for _ in range(300)]
    records += [step(rng, fresh, target="t2", draft="d2") for _ in range(2000)]
    watch = DriftWatch()
    found = run(watch, records)
    assert [f.alertname for _, f in found][0] == "StaleDraft" and not found[0][1].resolves
    stale_pair = watch._domains["logs"].lineages[("t2", "d1")]
    assert stale_pair.flags.n < watch.config.min_baseline and watch._domains["logs"].current.test is None
    ends = [(i, f) for i, f in found if f.resolves]
    if not resolved:
        assert ends == []
        return
    (i, end), = ends
    assert 2340 + 60 <= i <= 2340 + 400  # min_baseline positions, then the bound clears half way
    assert end.annotations["resolved_by"] == "target t2, draft d2"


def test_a_resolving_finding_resolves_the_alert():
    from alerts.manager import AlertManager

    manager = AlertManager([], pod="p")
    manager.handle(Finding("StaleDraft", "logs", "warning", {"summary": "stale"}))
    manager.tick()
    assert [a.labels["alertname"] for a in manager.alerts("firing")] == ["StaleDraft"]
    manager.handle(Finding("StaleDraft", "logs", "info", {}, resolves=True))
    manager.tick()
    assert manager.alerts("firing") == [] and manager.alerts("resolved")[0].labels["severity"] == "warning"


def test_stale_draft_on_a_new_draft_names_both_drafts_and_is_critical_when_slower_than_plain():
    rng = random.Random(3)
    slow = (0.04, 0.01)  # c = 1 per drafted token: at acceptance 0.3 speculation loses
    records = [step(rng, 0.9, seconds=slow) for _ in range(2000)]
    records += [step(rng, 0.3, draft="d2", seconds=slow) for _ in range(500)]
    (_, finding), = run(DriftWatch(), records)
    assert finding.annotations["old_draft_version"] == "d1" and finding.annotations["draft_version"] == "d2"
    assert finding.severity == "critical" and finding.annotations["speedup_after"].startswith("0.")


def test_acceptance_drift_within_a_version_fires_once_and_rebaselines():
    rng = random.Random(4)
    records = [step(rng, 0.8) for _ in range(2000)] + [step(rng, 0.35) for _ in range(3000)]
    found = run(DriftWatch(), records)
    assert len(found) == 1
    i, finding = found[0]
    assert finding.alertname == "AcceptanceDrift" and 2000 <= i <= 2030
    assert set(finding.detector.split("+")) <= {"cusum", "expected-cusum", "adwin"}
    assert float(finding.annotations["acceptance_before"]) > 0.7
    assert float(finding.annotations["acceptance_after"]) < 0.5


def test_positions_after_the_first_rejection_do_not_count():
    rng = random.Random(5)
    plain, garbage = DriftWatch(), DriftWatch()
    for _ in range(3000):
        r = step(rng, 0.7, k=8)
        counted = r.accepted + (r.accepted < r.lookahead)
        zeros = StepRecord(**{**r.to_dict(), "expected_acceptance": r.expected_acceptance[:counted] + [0.0] * (
            8 - counted)})
        assert plain.observe(r) == garbage.observe(zeros) == []
    assert plain.statistics() == garbage.statistics()


def test_interleaved_versions_keep_their_own_state():
    rng = random.Random(6)
    records = [step(rng, 0.85) for _ in range(1500)]
    records += [step(rng, 0.85, target="t2" if i % 2 else "t1") for i in range(4000)]  # a rolling update
    watch = DriftWatch()
    assert run(watch, records) == []
    d = watch._domains["logs"]
    assert set(d.lineages) == {("t1", "d1"), ("t2", "d1")}
    assert d.lineages[("t2", "d1")].test.decision == NO_DROP
    assert not d.lineages[("t1", "d1")].cusum.warming_up  # the old version was never reset


def test_statistics_name_domain_and_detector():
    watch = DriftWatch()
    run(watch, versions_stream(7, 0.9, 0.9, n_before=1500, n_after=50))
    stats = watch.statistics()
    assert set(stats) == {("logs", n) for n in ("cusum", "expected-cusum", "adwin", "stale-draft")}
    assert all(isinstance(v, float) for v in stats.values())


def test_below_break_even_needs_both_sides_measured():
    def stream(seed, spec_seconds, plain_every):
        rng = random.Random(seed)
        return [step(rng, 0.0, k=0, seconds=(0.0, 0.01)) if plain_every and i % plain_every == 0
                else step(rng, 0.5, seconds=spec_seconds) for i in range(3000)]
    slower = run(DriftWatch(), stream(8, (0.02, 0.02), 10))  # ~1.9 tokens per 0.04 s < 1 per 0.01 s
    assert [f.alertname for _, f in slower] == ["BelowBreakEven"]
    notes = slower[0][1].annotations
    assert float(notes["speculative_goodput"]) < float(notes["plain_goodput"])
    assert run(DriftWatch(), stream(8, (0.002, 0.01), 10)) == []  # faster than plain: nothing
    assert run(DriftWatch(), stream(8, (0.02, 0.02), 0)) == []  # plain never measured: nothing
    off = WatchConfig(breakeven=None)
    assert run(DriftWatch(off), stream(8, (0.02, 0.02), 10)) == []


def test_a_finding_becomes_an_alert():
    from alerts.manager import AlertManager
    manager = AlertManager([], pod="pod-a", clock=lambda: 1_700_000_100.0)
    (_, finding), = run(DriftWatch(), versions_stream(9, 0.9, 0.4))
    assert isinstance(finding, Finding)
    manager.handle(finding)
    manager.tick()
    (alert,) = manager.firing()
    assert alert.labels == {"alertname": "StaleDraft", "domain": "logs", "severity": "warning", "pod": "pod-a"}
    assert alert.annotations["new_target_version"] == "t2" and alert.annotations["detector"] == "stale-draft"


def test_config_is_validated():
    with pytest.raises(ValueError, match="min_baseline"):
        WatchConfig(min_baseline=0)
    with pytest.raises(ValueError, match="cusum"):
        WatchConfig(cusum=None)
