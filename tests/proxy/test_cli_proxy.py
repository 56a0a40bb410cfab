"""`specwatch proxy` as a process: serves the engine on the inference port and its own routes on the admin
listener only (behind the token), records, flushes every record on SIGTERM and exits 0."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time

import httpx
from typer.testing import CliRunner

from agent.cli import _register, app
from specwatch_core.records import StepRecord
from storage import Store
from storage.query import StatsQuery
from tests.proxy.fake_engine import FakeEngine
from tests.proxy.servers import Running, free_port

CLI = [sys.executable, "-c", "from agent.cli import main; main()"]


def test_help_ends_with_an_example_and_bad_options_name_the_field(tmp_path):
    _register()
    runner = CliRunner()
    example = " ".join(runner.invoke(app, ["proxy", "--help"]).output.split()).split("Example:")[-1]
    assert "specwatch proxy --upstream k4=" in example and example.endswith("--port 8788 --admin-port 8789")
    out = runner.invoke(app, ["proxy", "--upstream", "fast=http://127.0.0.1:1"])
    assert out.exit_code == 1 and "config: upstream: pool name must be off or kN" in out.output
    out = runner.invoke(app, ["proxy", "--upstream", "k2=http://127.0.0.1:1", "--domain-rule", "colour:x=y"])
    assert out.exit_code == 1 and "domain_rule" in out.output
    port = free_port()
    out = runner.invoke(app, ["proxy", "--upstream", "k2=http://127.0.0.1:1", "--db", f"sqlite:///{tmp_path / 'p.db'}",
                              "--port", str(port), "--admin-port", str(port)])
    assert out.exit_code == 1 and f"admin listener: port {port} is the inference listener's" in out.output


def test_pools_up_to_k64_pass_the_cli_and_the_store_takes_their_records(tmp_path, monkeypatch):
    import agent.proxy.run as run

    started = {}

    def serve(options, runtime):
        started["options"] = options
        try:
            runtime.sidecar.record(StepRecord(
                domain="code", lookahead=64, accepted=300, emitted=340, draft_seconds=0.0, verify_seconds=0.0,
                seconds=0.2, steps=40, drafted=64 * 40, pool="k64", target_version="t", draft_version="d",
                timestamp=time.time()))
            runtime.sidecar.flush(math.inf)
            started["rows"] = runtime.sidecar.store.stats(StatsQuery(until=time.time() + 60, by=("lookahead",))).rows
        finally:
            runtime.close()
        return 0

    monkeypatch.setattr(run, "serve", serve)
    _register()
    db = f"sqlite:///{tmp_path / 'k64.db'}"
    out = CliRunner().invoke(app, ["proxy", "--upstream", "k64=http://127.0.0.1:1", "--upstream",
                                   "k8=http://127.0.0.1:2", "--upstream", "off=http://127.0.0.1:3", "--db", db])
    assert out.exit_code == 0, out.output
    options = started["options"]
    assert [u.lookahead for u in options.upstreams] == [64, 8, 0] and options.sidecar.kmax == 64
    (row,) = started["rows"]
    assert (row["lookahead"], row["steps"], row["drafted"]) == (64, 40, 64 * 40)
    assert options.default_pool is None and options.sidecar.policy == "pool-cap+switch"
    out = CliRunner().invoke(app, ["proxy", "--upstream", "k65=http://127.0.0.1:1", "--db", db])
    assert out.exit_code == 1 and "lookahead over 64" in out.output
    out = CliRunner().invoke(app, ["proxy", "--upstream", "k64=http://127.0.0.1:1", "--upstream",
                                   "off=http://127.0.0.1:2", "--default-pool", "k64", "--db", db])
    assert out.exit_code == 0 and started["options"].default_pool == "k64"
    out = CliRunner().invoke(app, ["proxy", "--upstream", "k64=http://127.0.0.1:1", "--default-pool", "k8",
                                   "--db", db])
    assert out.exit_code == 1 and "config: default_pool: no pool named 'k8'" in out.output


def test_the_process_keeps_its_routes_off_the_inference_port_and_flushes_everything_on_sigterm(tmp_path):
    engine = FakeEngine(lookahead=2, accepted=1)
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    port, admin = free_port(), free_port()
    token = "c" * 24
    with Running(engine.app) as upstream:
        proc = subprocess.Popen([*CLI, "proxy", "--upstream", f"k2={upstream.url}", "--db", db, "--port", str(port),
                                 "--admin-port", str(admin)],
                                env={**os.environ, "SPECWATCH_POD": "cli", "SPECWATCH_TOKEN": token},
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read().decode()
                time.sleep(0.2)
            for _ in range(3):
                httpx.post(f"http://127.0.0.1:{port}/v1/completions", json={"prompt": "p", "max_tokens": 10},
                           headers={"X-Specwatch-Domain": "code"}).raise_for_status()
            for path in ("/specwatch/metrics", "/specwatch/pools", "/pools", "/alerts"):  # the engine's 404s
                answer = httpx.get(f"http://127.0.0.1:{port}{path}")
                assert (answer.status_code, answer.headers["x-specwatch-pool"]) == (404, "k2"), path
            assert httpx.get(f"http://127.0.0.1:{admin}/metrics").status_code == 401
            metrics = httpx.get(f"http://127.0.0.1:{admin}/metrics", headers={"Authorization": f"Bearer {token}"})
            assert 'specwatch_proxy_requests_total{pool="k2",result="recorded"} 3.0' in metrics.text
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
    with Store.open(db) as store:
        (row,) = store.stats(StatsQuery(until=time.time() + 60, by=("domain",))).rows  # windows still open
    assert (row["domain"], row["drafted"], row["accepted"]) == ("code", engine.drafted_total, engine.accepted_total)
