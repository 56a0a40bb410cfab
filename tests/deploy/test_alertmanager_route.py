"""deploy/alertmanager/route-example.yml: Alertmanager's amtool accepts it, and routes every alert specwatch can
raise (its Prometheus rules and the sidecar's own catalogue) to the receiver of its severity."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from alerts.alert import CATALOGUE

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "deploy" / "alertmanager" / "route-example.yml"
RULES = ROOT / "deploy" / "prometheus" / "rules.yml"
AMTOOL = shutil.which("amtool")
pytestmark = pytest.mark.skipif(AMTOOL is None, reason=(
    "amtool not on PATH (Debian: apt-get install prometheus-alertmanager, which ships it; CI installs it)"))
RECEIVERS = {"critical": "specwatch-critical", "warning": "specwatch-warning", "info": "specwatch-info"}


def amtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([AMTOOL, *args], capture_output=True, text=True, timeout=60)


def receiver(config: Path, **labels: str) -> str:
    result = amtool("config", "routes", "test", f"--config.file={config}", *(f"{k}={v}" for k, v in labels.items()))
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.strip()


def test_amtool_accepts_the_config():
    result = amtool("check-config", str(CONFIG))
    assert result.returncode == 0 and "SUCCESS" in result.stdout, result.stdout + result.stderr


def test_amtool_rejects_a_broken_variant(tmp_path):
    config = yaml.safe_load(CONFIG.read_text())
    config["route"]["routes"][0]["routes"][0]["receiver"] = "specwatch-pager"  # no such receiver
    broken = tmp_path / "broken.yml"
    broken.write_text(yaml.safe_dump(config))
    result = amtool("check-config", str(broken))
    assert result.returncode != 0 and "specwatch-pager" in result.stdout + result.stderr


def test_every_alert_goes_to_the_receiver_of_its_severity():
    alerts = [(r["alert"], r["labels"]["severity"]) for g in yaml.safe_load(RULES.read_text())["groups"]
              for r in g["rules"] if "alert" in r]
    alerts += [(t.name, t.severity) for t in CATALOGUE.values()]
    alerts += [("StaleDraft", "warning")]  # critical only when the draft makes speculation slower than plain
    assert {severity for _, severity in alerts} == set(RECEIVERS)
    for alertname, severity in alerts:
        assert receiver(CONFIG, alertname=alertname, severity=severity, domain="code") == RECEIVERS[severity], alertname


def test_other_alerts_keep_the_default_route():
    assert receiver(CONFIG, alertname="KubePodCrashLooping", severity="critical") == "default"
