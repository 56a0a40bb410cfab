"""deploy/k8s and deploy/Dockerfile: the sidecar is a native sidecar with its probes, configured only by
SPECWATCH_* variables the code reads, scraped on the port it listens on; the image runs it as non-root."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import typer
import yaml

from agent.cli.scrape import scrape
from agent.runtime.config import FIELDS

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
# Variables specwatch_core/settings.py reads outside agent.runtime.config's SidecarConfig fields.
SETTINGS_VARS = {"SPECWATCH_HOME", "SPECWATCH_DB", "SPECWATCH_DEVICE", "SPECWATCH_POD", "SPECWATCH_CONFIG"}
KNOWN_VARS = SETTINGS_VARS | {f"SPECWATCH_{name.upper()}" for name in FIELDS}


def documents(name: str) -> dict[str, dict]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all((DEPLOY / "k8s" / name).read_text()) if doc}


def pod_spec() -> dict:
    return documents("deployment.yaml")["Deployment"]["spec"]["template"]["spec"]


def container(name: str) -> dict:
    spec = pod_spec()
    [found] = [c for c in spec.get("initContainers", []) + spec["containers"] if c["name"] == name]
    return found


def port_number(c: dict, port) -> int:
    if isinstance(port, int):
        return port
    [number] = [p["containerPort"] for p in c.get("ports", []) if p["name"] == port]
    return number


def env(c: dict) -> dict[str, dict]:
    return {e["name"]: e for e in c.get("env", [])}


def test_specwatch_is_a_native_sidecar_with_probes():
    spec = pod_spec()
    assert {c["name"] for c in spec["initContainers"]} == {"specwatch", "specwatch-scrape"}
    assert all(c["restartPolicy"] == "Always" for c in spec["initContainers"])
    assert [c["name"] for c in spec["containers"]] == ["vllm"]
    sidecar = container("specwatch")
    assert sidecar["args"] == ["serve"]
    probes = {kind: sidecar[kind]["httpGet"] for kind in ("startupProbe", "livenessProbe", "readinessProbe")}
    assert probes["livenessProbe"]["path"] == "/healthz" and probes["readinessProbe"]["path"] == "/readyz"
    assert probes["startupProbe"]["path"] == "/healthz"
    assert {port_number(sidecar, p["port"]) for p in probes.values()} == {8790}


def test_config_by_env_uses_only_variables_the_code_reads():
    sidecar = env(container("specwatch"))
    assert sidecar["SPECWATCH_HOST"]["value"] == "0.0.0.0"  # probes come from outside the container
    assert int(sidecar["SPECWATCH_PORT"]["value"]) == port_number(container("specwatch"), "specwatch")
    assert sidecar["SPECWATCH_POD"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert sidecar["SPECWATCH_DB"]["value"].startswith("sqlite:////var/lib/specwatch/")
    mounts = {m["mountPath"] for m in container("specwatch")["volumeMounts"]}
    assert "/var/lib/specwatch" in mounts
    for name in ("specwatch", "specwatch-scrape"):
        unknown = {v for v in env(container(name)) if v.startswith("SPECWATCH_")} - KNOWN_VARS
        assert not unknown, f"{name}: {unknown}"


def test_the_variable_check_has_power():
    assert "SPECWATCH_HOST" in KNOWN_VARS and "SPECWATCH_MAX_DOMAINS" in KNOWN_VARS
    assert "SPECWATCH_HOSTNAME" not in KNOWN_VARS


def test_scrape_container_arguments_are_options_of_specwatch_scrape():
    app = typer.Typer()
    app.command()(scrape)
    command = typer.main.get_command(app)
    options = {opt for param in command.params for opt in param.opts if opt.startswith("--")}
    args = container("specwatch-scrape")["args"]
    assert args[0] == "scrape"
    given = {a.split("=", 1)[0] for a in args[1:]}
    assert given <= options, given - options
    assert {"--url", "--domain", "--sidecar"} <= given
    values = dict(a.split("=", 1) for a in args[1:])
    sidecar_port = port_number(container("specwatch"), "specwatch")
    assert values["--sidecar"] == f"http://127.0.0.1:{sidecar_port}"
    engine_port = port_number(container("vllm"), "http")
    assert values["--url"] == f"http://127.0.0.1:{engine_port}/metrics"


def test_prometheus_finds_the_sidecar():
    template = documents("deployment.yaml")["Deployment"]["spec"]["template"]
    annotations = template["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true" and annotations["prometheus.io/path"] == "/metrics"
    assert int(annotations["prometheus.io/port"]) == 8790
    service = documents("deployment.yaml")["Service"]
    assert service["metadata"]["name"] == "specwatch"  # the job label rules.yml expects
    assert service["spec"]["selector"].items() <= template["metadata"]["labels"].items()
    monitor = documents("servicemonitor.yaml")["ServiceMonitor"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not on PATH")
def test_kustomize_builds():
    result = subprocess.run(["kubectl", "kustomize", str(DEPLOY / "k8s")], capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr.decode()
    kinds = {doc["kind"] for doc in yaml.safe_load_all(result.stdout) if doc}
    assert kinds == {"Deployment", "Service", "PodMonitor", "PrometheusRule"}  # tests/deploy/test_kustomize_render.py


def dockerfile() -> list[tuple[str, str]]:
    """(instruction, arguments) pairs, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n\s*", " ", (DEPLOY / "Dockerfile").read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [tuple(line.split(None, 1)) for line in lines]


def test_dockerfile_builds_a_non_root_specwatch_serve_image():
    steps = dockerfile()
    get = lambda kind: [args for k, args in steps if k == kind]  # noqa: E731
    assert get("FROM") == ["python:3.11-slim"]
    assert any("install-torch" in run for run in get("RUN"))
    assert any(run.startswith("pip install .") for run in get("RUN"))
    [user] = get("USER")
    assert user.isdigit() and int(user) != 0  # numeric: runAsNonRoot can verify it
    assert get("ENTRYPOINT") == ['["specwatch"]'] and get("CMD") == ['["serve"]']
    torch_step = next(i for i, (k, a) in enumerate(steps) if k == "RUN" and "install-torch" in a)
    install_step = next(i for i, (k, a) in enumerate(steps) if k == "RUN" and a.startswith("pip install ."))
    assert torch_step < install_step  # CPU torch first, so `pip install .` does not pull a CUDA build


def test_dockerfile_copies_every_package():
    project = tomllib.loads((DEPLOY.parent / "pyproject.toml").read_text())
    packages = {p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    copied = {args.split()[0] for kind, args in dockerfile() if kind == "COPY"}
    assert packages <= copied, packages - copied
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    assert all(f"!{p}/" in ignore for p in packages)
