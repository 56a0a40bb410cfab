"""deploy/prometheus/rules.yml: promtool accepts it, its unit tests pass (and fail on a broken variant), it
names only metrics specwatch exports; and `promtool check metrics` finds no problem in /metrics output."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml
from prometheus_client import generate_latest

from promql_names import BUILTIN, PROMTOOL, exported_names, metric_names, needs_promtool, populated_metrics

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "rules.yml"
RULE_TESTS = Path(__file__).with_name("rules_test.yml")


def promtool(*args: str, stdin: bytes | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, *args], input=stdin, capture_output=True, timeout=120, cwd=cwd)


def rules() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


@needs_promtool
def test_promtool_checks_rules():
    result = promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()


@needs_promtool
def test_promtool_rule_unit_tests_pass():
    result = promtool("test", "rules", str(RULE_TESTS))
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()


@needs_promtool
def test_rule_unit_tests_fail_on_a_broken_variant(tmp_path):
    # A drop threshold of 0.9 instead of 0.7 would alert on the mild dip of `chat`, which must stay quiet.
    text = RULES.read_text()
    assert "< 0.7 * (domain:specwatch_acceptance:ratio_1h" in text
    (tmp_path / "deploy" / "prometheus").mkdir(parents=True)
    (tmp_path / "deploy" / "prometheus" / "rules.yml").write_text(
        text.replace("< 0.7 * (domain:specwatch_acceptance:ratio_1h", "< 0.9 * (domain:specwatch_acceptance:ratio_1h"))
    (tmp_path / "tests" / "deploy").mkdir(parents=True)
    unit_tests = yaml.safe_load(RULE_TESTS.read_text())
    unit_tests["tests"] = unit_tests["tests"][:1]  # the group with `chat`; the day-long one is slow
    (tmp_path / "tests" / "deploy" / "rules_test.yml").write_text(yaml.safe_dump(unit_tests))
    result = promtool("test", "rules", str(tmp_path / "tests" / "deploy" / "rules_test.yml"))
    assert result.returncode != 0
    assert 'domain="chat"' in (result.stdout + result.stderr).decode()


def test_every_alert_has_severity_and_explains_itself():
    alerts = [r for r in rules() if "alert" in r]
    assert {a["alert"] for a in alerts} >= {
        "SpecwatchAcceptanceDrop", "SpecwatchAcceptanceBelowDailyBaseline", "SpecwatchAcceptanceBelowBreakEven",
        "SpecwatchSpeculationDisabled", "SpecwatchDown", "SpecwatchNoSteps"}
    for alert in alerts:
        assert alert["labels"]["severity"] in {"info", "warning", "critical"}, alert["alert"]
        assert {"summary", "description", "action"} <= set(alert["annotations"]), alert["alert"]
        assert alert["alert"].startswith("Specwatch")  # never clashes with the sidecar's own alert names


def test_rules_name_only_exported_or_recorded_metrics():
    defined = exported_names() | BUILTIN | {r["record"] for r in rules() if "record" in r}
    for rule in rules():
        unknown = metric_names(rule["expr"]) - defined
        assert not unknown, f"{rule.get('alert') or rule.get('record')}: unknown metrics {sorted(unknown)}"


def test_name_check_catches_a_typo():
    defined = exported_names()
    assert metric_names("sum by (domain) (rate(specwatch_accepted_tokens_total[5m]))") <= defined
    assert metric_names("sum by (domain) (rate(specwatch_accepted_token_total[5m]))") - defined == {
        "specwatch_accepted_token_total"}
    assert metric_names('x offset 30m < 0.7 * on (domain) y{domain=~"a|b"}[1h:5m] and z') == {"x", "y", "z"}


@needs_promtool
def test_promtool_check_metrics_finds_no_problem():
    exposition = generate_latest(populated_metrics().registry)
    assert b"specwatch_reached_tokens_per_position_total" in exposition
    result = promtool("check", "metrics", stdin=exposition)
    assert result.returncode == 0 and not result.stdout.strip() and not result.stderr.strip(), (
        result.stdout.decode() + result.stderr.decode())


@needs_promtool
def test_promtool_check_metrics_is_strict_enough_to_fail():
    # The same check on a counter without the _total suffix must report it, or the test above proves nothing.
    bad = b"# HELP specwatch_steps Steps.\n# TYPE specwatch_steps counter\nspecwatch_steps 3\n"
    result = promtool("check", "metrics", stdin=bad)
    assert result.returncode != 0 and b"_total" in result.stdout + result.stderr


@needs_promtool
def test_promtool_check_metrics_on_the_live_endpoint(tmp_path):
    # The sidecar as `specwatch serve` builds it: records in through POST /v1/steps, decisions asked for,
    # then GET /metrics exactly as Prometheus scrapes it.
    from fastapi.testclient import TestClient

    from agent.http.serve import build
    from agent.runtime.config import SidecarConfig
    from promql_names import realistic_records

    runtime = build(SidecarConfig(db=f"sqlite:///{tmp_path / 'h.db'}", pod="test-pod"))
    try:
        with TestClient(runtime.app) as client:
            posted = client.post("/v1/steps", json={"records": [r.to_dict() for r in realistic_records(300)]})
            assert posted.status_code == 202, posted.text
            for domain in ("code", "chat"):
                assert client.get("/v1/decision", params={"domain": domain}).status_code == 200
            runtime.sidecar.flush()  # the scheduler's flush job exports the decision and drift gauges
            exposition = client.get("/metrics").content
    finally:
        runtime.close()
    assert b'specwatch_steps_total{domain="code"}' in exposition and b"specwatch_lookahead{" in exposition
    result = promtool("check", "metrics", stdin=exposition)
    assert result.returncode == 0 and not result.stdout.strip() and not result.stderr.strip(), (
        result.stdout.decode() + result.stderr.decode())
