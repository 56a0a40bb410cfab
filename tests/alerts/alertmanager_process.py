"""A real Prometheus Alertmanager (Debian's prometheus-alertmanager) on a loopback port, for the tests that
send to one: started with a given configuration, cluster mode off, stopped by ``stop_all``."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from alert_fakes import free_port

BINARY = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
MISSING = "prometheus-alertmanager is not installed (apt-get install prometheus-alertmanager)"


class Alertmanagers:
    def __init__(self, folder: Path):
        self.folder = folder
        self.processes: list[tuple[subprocess.Popen, object]] = []

    def start(self, config: str, port: int | None = None) -> str:
        """Start one with ``config`` (YAML) on ``port`` (default: a free one); its URL once it is ready."""
        port = port or free_port()
        folder = self.folder / f"am-{port}"
        folder.mkdir()
        (folder / "am.yml").write_text(config)
        log = open(folder / "log", "wb")
        process = subprocess.Popen([BINARY, f"--config.file={folder / 'am.yml'}", f"--storage.path={folder}",
                                    f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
                                   stdout=log, stderr=subprocess.STDOUT)
        self.processes.append((process, log))
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if process.poll() is not None:
                pytest.fail(f"Alertmanager exited: {(folder / 'log').read_text()[-500:]}")
            try:
                if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    return url
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        pytest.fail("Alertmanager was not ready within 30 s")

    def stop_all(self) -> None:
        for process, log in self.processes:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log.close()
