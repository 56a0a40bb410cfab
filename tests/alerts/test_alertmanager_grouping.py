"""Fleet-wide deduplication through a real Alertmanager: two sidecars (two AlertManagers with different pods)
fire the same StaleDraft; the documented route (deploy/alertmanager/route-example.yml, group_by without
``pod``) sends one notification holding both alerts to a webhook on loopback. The broken variant (group_by with
``pod``) sends two, so the test can fail."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from alertmanager_process import BINARY, MISSING, Alertmanagers
from alerts.config import AlertConfig
from alerts.manager import AlertManager
from alerts.sinks import AlertmanagerSink

pytestmark = pytest.mark.skipif(BINARY is None, reason=MISSING)
ROUTE = Path(__file__).resolve().parents[2] / "deploy" / "alertmanager" / "route-example.yml"
FAST = AlertConfig(retry_initial_seconds=0.05, retry_max_seconds=0.2)


class Recorder(ThreadingHTTPServer):
    """A webhook receiver: keeps every notification's JSON body."""

    def __init__(self):
        self.notifications: list[dict] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                recorder.notifications.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"


def config(hook: str, group_by: list[str] | None = None) -> str:
    """The documented route with every receiver pointed at ``hook`` and short timers (group_by unchanged
    unless given)."""
    doc = yaml.safe_load(ROUTE.read_text())
    for receiver in doc["receivers"]:
        for hook_config in receiver.get("webhook_configs", []):
            hook_config["url"] = hook
    specwatch = doc["route"]["routes"][0]
    for route in (specwatch, *specwatch["routes"]):
        route["group_wait"], route["group_interval"] = "1s", "1m"
    if group_by is not None:
        specwatch["group_by"] = group_by
    return yaml.safe_dump(doc)


@pytest.fixture
def alertmanager(tmp_path):
    running = Alertmanagers(tmp_path)
    yield running.start
    running.stop_all()


def two_sidecars_fire_stale_draft(url: str) -> None:
    sidecars = [AlertManager([AlertmanagerSink(url)], pod=pod, config=FAST) for pod in ("llm-0", "llm-1")]
    try:
        for sidecar in sidecars:
            sidecar.fire("StaleDraft", "logs", "critical", {"target_version": "t2", "draft_version": "d1"})
            sidecar.tick()
        assert all(s.flush(timeout=10) for s in sidecars)
    finally:
        for sidecar in sidecars:
            sidecar.close(timeout=5)


def received(recorder: Recorder, at_least: int, settle: float = 3.0) -> list[dict]:
    """Notifications once ``at_least`` came, after ``settle`` more seconds (none may follow)."""
    deadline = time.monotonic() + 30
    while len(recorder.notifications) < at_least and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(settle)
    return list(recorder.notifications)


@pytest.fixture
def recorder():
    server = Recorder()
    yield server
    server.shutdown()
    server.server_close()


def test_two_sidecars_one_notification_with_the_documented_grouping(alertmanager, recorder):
    two_sidecars_fire_stale_draft(alertmanager(config(recorder.url)))
    [notification] = received(recorder, 1)
    assert notification["receiver"] == "specwatch-critical"
    assert notification["groupLabels"] == {"alertname": "StaleDraft", "domain": "logs"}
    assert sorted(a["labels"]["pod"] for a in notification["alerts"]) == ["llm-0", "llm-1"]


def test_grouping_by_pod_sends_one_notification_per_sidecar(alertmanager, recorder):
    two_sidecars_fire_stale_draft(alertmanager(config(recorder.url, ["alertname", "namespace", "domain", "pod"])))
    notifications = received(recorder, 2)
    assert len(notifications) == 2
    assert sorted(n["groupLabels"]["pod"] for n in notifications) == ["llm-0", "llm-1"]
