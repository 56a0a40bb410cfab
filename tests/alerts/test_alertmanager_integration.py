"""Against a real Prometheus Alertmanager (Debian's prometheus-alertmanager) on a loopback port: fired
alerts appear in GET /api/v2/alerts with our labels and annotations and go away once resolved; one that
starts after the alerts were fired still gets them."""

import httpx
import pytest

from alertmanager_process import BINARY, MISSING, Alertmanagers
from alerts.config import AlertConfig
from alerts.manager import AlertManager
from alerts.sinks import AlertmanagerSink
from alert_fakes import free_port

pytestmark = pytest.mark.skipif(BINARY is None, reason=MISSING)
CONFIG = 'route:\n  receiver: "null"\nreceivers:\n  - name: "null"\n'
FAST = AlertConfig(retry_initial_seconds=0.05, retry_max_seconds=0.2)


@pytest.fixture
def start_alertmanager(tmp_path):
    """Start Alertmanager on a port and wait until it is ready; stopped afterwards."""
    running = Alertmanagers(tmp_path)
    yield lambda port: running.start(CONFIG, port)
    running.stop_all()


def active(url: str) -> dict[tuple[str, str], dict]:
    """Active alerts in Alertmanager by (alertname, domain)."""
    alerts = httpx.get(f"{url}/api/v2/alerts", timeout=5).json()
    return {(a["labels"]["alertname"], a["labels"]["domain"]): a for a in alerts
            if a["status"]["state"] == "active"}


def test_fired_alerts_appear_with_labels_and_annotations_then_resolve(start_alertmanager):
    url = start_alertmanager(free_port())
    manager = AlertManager([AlertmanagerSink(url, generator_url="http://pod-1:8790/v1/alerts")],
                           pod="pod-1", config=FAST)
    try:
        manager.fire("AcceptanceDrift", "code", "warning", {
            "acceptance_before": "0.71", "acceptance_after": "0.35", "speed-up lost": "31%"})
        manager.fire("StaleDraft", "chat", annotations={"draft_version": "d1", "target_version": "t2"})
        manager.tick()
        assert manager.flush(timeout=10)
        seen = active(url)
        assert set(seen) == {("AcceptanceDrift", "code"), ("StaleDraft", "chat")}
        drift = seen["AcceptanceDrift", "code"]
        assert drift["labels"] == {"alertname": "AcceptanceDrift", "domain": "code", "severity": "warning",
                                   "pod": "pod-1"}
        assert drift["annotations"]["summary"] == "Acceptance in code moved from 0.71 to 0.35"
        assert drift["annotations"]["speed_up_lost"] == "31%" and drift["annotations"]["action"]
        assert drift["generatorURL"] == "http://pod-1:8790/v1/alerts"
        assert seen["StaleDraft", "chat"]["labels"]["severity"] == "critical"

        manager.resolve("AcceptanceDrift", "code")
        manager.tick()
        assert manager.flush(timeout=10)
        assert set(active(url)) == {("StaleDraft", "chat")}
        manager.resolve("StaleDraft", "chat")
        manager.tick()
        assert manager.flush(timeout=10)
        assert active(url) == {}
        assert manager.deliveries[0].stats.failures == 0
    finally:
        manager.close(timeout=5)


def test_alertmanager_started_late_gets_the_alerts(start_alertmanager):
    port = free_port()
    manager = AlertManager([AlertmanagerSink(f"http://127.0.0.1:{port}", timeout=2)], pod="pod-1", config=FAST)
    try:
        manager.fire("SpeculationDisabled", "code", annotations={"reason": "goodput 0.8x of K = 0"})
        manager.tick()
        delivery = manager.deliveries[0]
        while delivery.stats.failures < 2:  # connection refused: nothing listens yet
            delivery.wait_idle(0.01)
        url = start_alertmanager(port)
        assert manager.flush(timeout=10)
        [(key, alert)] = active(url).items()
        assert key == ("SpeculationDisabled", "code")
        assert alert["annotations"]["summary"] == "Speculation turned off in code: goodput 0.8x of K = 0"
    finally:
        manager.close(timeout=5)
