"""``specwatch alerts`` through typer's CliRunner on a small SQLite database written by the manager."""

import csv
import io
import json
import time

import pytest
import typer
from typer.testing import CliRunner

from agent.cli import alerts as cli_alerts
from alerts.config import AlertConfig
from alerts.manager import AlertManager
from alert_fakes import Clock
from storage import Store

runner = CliRunner()
app = typer.Typer()
app.command(epilog=cli_alerts.EXAMPLE)(cli_alerts.alerts)
app.command("noop")(lambda: None)  # two commands, so `alerts` is addressed by name as in specwatch
NOW = time.time() // 60 * 60  # --since 24h is relative to the wall clock
DAY = 86400


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('cli') / 'alerts.db'}"
    clock = Clock(NOW - 3 * DAY)
    store = Store.open(url, clock=clock)
    manager = AlertManager([], store, pod="pod-1", config=AlertConfig(), clock=clock)
    manager.fire("StaleDraft", "prose", annotations={"draft_version": "d0", "target_version": "t1"})
    manager.tick()
    clock.now = NOW - 2 * DAY
    manager.resolve("StaleDraft", "prose")  # over before the last day
    clock.now = NOW - 2 * 3600
    manager.fire("AcceptanceDrift", "code", annotations={"acceptance_before": "0.71", "acceptance_after": "0.35"})
    manager.fire("SpeculationDisabled", "chat", annotations={"reason": "goodput 0.8x"})
    manager.tick()
    clock.now = NOW - 3600
    manager.resolve("AcceptanceDrift", "code")
    manager.close()
    store.close()
    return url


def run(*args):
    return runner.invoke(app, ["alerts", *map(str, args)])


def test_firing_by_default_as_a_table(url):
    result = run("--db", url)
    assert result.exit_code == 0, result.output
    # the table may wrap long names at the terminal width; the domains show whole
    assert "firing alerts" in result.stdout and "chat" in result.stdout and "code" not in result.stdout


def test_all_as_json_with_iso_times_and_annotations(url):
    result = run("--db", url, "--state", "all", "--format", "json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [(r["alertname"], r["state"]) for r in rows] == [
        ("StaleDraft", "resolved"), ("AcceptanceDrift", "resolved"), ("SpeculationDisabled", "firing")]
    drift = rows[1]
    assert drift["starts_at"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW - 2 * 3600))
    assert drift["ends_at"].endswith("Z") and rows[2]["ends_at"] is None
    assert drift["summary"] == "Acceptance in code moved from 0.71 to 0.35"
    assert drift["annotations"]["acceptance_before"] == "0.71" and drift["pod"] == "pod-1"


def test_since_keeps_alerts_active_in_the_range_and_domain_filters(url):
    result = run("--db", url, "--state", "all", "--since", "24h", "--format", "csv")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [r["domain"] for r in rows] == ["code", "chat"]
    assert json.loads(rows[0]["annotations"])["acceptance_after"] == "0.35"
    result = run("--db", url, "--state", "resolved", "--domain", "prose", "--format", "json")
    assert [r["alertname"] for r in json.loads(result.stdout)] == ["StaleDraft"]


def test_nothing_found_says_so(url):
    result = run("--db", url, "--domain", "nope")
    assert result.exit_code == 0 and result.stdout.strip() == "no firing alerts in domain nope"
    result = run("--db", url, "--domain", "nope", "--format", "json")
    assert json.loads(result.stdout) == []


@pytest.mark.parametrize("args,message", [
    (("--since", "yesterday"), "error: --since: expected a span back from now"),
    (("--state", "open"), "Invalid value for '--state'"),
])
def test_bad_arguments(url, args, message):
    result = run("--db", url, *args)
    assert result.exit_code != 0 and message in result.output and "Traceback" not in result.output


def test_missing_database_is_one_line(tmp_path):
    result = run("--db", f"sqlite:///{tmp_path / 'none.db'}")
    assert result.exit_code == 1 and result.output.startswith("error: no database at")


def test_help_ends_with_an_example():
    result = runner.invoke(app, ["alerts", "--help"])
    assert "Example: specwatch alerts" in result.output
