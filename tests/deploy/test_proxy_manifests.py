"""deploy/proxy: llama.cpp pools behind `specwatch proxy`. Clients reach the inference listener only (the
Service), the probes ask it, Prometheus scrapes the admin listener with the token; the container's arguments
are ones the CLI takes, the paths are routes the proxy serves, and every object is valid."""

from __future__ import annotations

import httpx
import pytest
import yaml

from tests.deploy.test_k8s_and_docker import KNOWN_VARS
from tests.deploy.test_kustomize_render import DEPLOY, kustomize, needs_kubectl, problems
from tests.proxy.conftest import engines, proxy  # noqa: F401 (fixtures)
from tests.proxy.fake_engine import FakeEngine

PROXY = DEPLOY / "proxy"


def objects() -> list[dict]:
    return [doc for name in ("deployment.yaml", "podmonitor.yaml")
            for doc in yaml.safe_load_all((PROXY / name).read_text()) if doc]


def one(kind: str) -> dict:
    [found] = [o for o in objects() if o["kind"] == kind]
    return found


def container() -> dict:
    [found] = [c for c in one("Deployment")["spec"]["template"]["spec"]["containers"] if c["name"] == "specwatch"]
    return found


def parse(args: list[str]) -> dict:
    """The proxy's options as the CLI parses ``args`` (the container's arguments); typer's usage error for a
    wrong option or value."""
    import typer

    from agent import cli

    if not cli.app.registered_commands:
        cli._register()
    assert args[0] == "proxy"
    return typer.main.get_command(cli.app).commands["proxy"].make_context("proxy", list(args[1:])).params


def options() -> dict:
    return parse(container()["args"])


def ports() -> dict[str, int]:
    return {p["name"]: p["containerPort"] for p in container()["ports"]}


def test_every_object_is_valid():
    assert sorted(o["kind"] for o in objects()) == ["Deployment", "PodMonitor", "Service"]
    for obj in objects():
        assert problems(obj) == [], f"{obj['kind']}/{obj['metadata']['name']}"


@needs_kubectl
def test_the_kustomization_renders_them():
    rendered = kustomize(PROXY)
    assert sorted((o["kind"], o["metadata"]["name"]) for o in rendered) == [
        ("Deployment", "llm-llamacpp"), ("PodMonitor", "specwatch-proxy"), ("Service", "llm-llamacpp")]


def test_clients_reach_the_inference_listener_only():
    given = options()
    assert ports() == {"http": given["port"], "admin": given["admin_port"]}
    assert given["host"] == given["admin_host"] == "0.0.0.0"  # probes and Prometheus come from outside
    service = one("Service")
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["http"]
    template = one("Deployment")["spec"]["template"]
    assert service["spec"]["selector"].items() <= template["metadata"]["labels"].items()


def test_the_probes_ask_the_inference_listener_and_prometheus_the_admin_one_with_the_token():
    c = container()
    assert c["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert c["startupProbe"]["tcpSocket"] == c["livenessProbe"]["tcpSocket"] == {"port": "http"}
    [endpoint] = one("PodMonitor")["spec"]["podMetricsEndpoints"]
    assert (endpoint["port"], endpoint["path"]) == ("admin", "/metrics")
    token = {e["name"]: e for e in c["env"]}["SPECWATCH_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert endpoint["authorization"] == {"type": "Bearer", "credentials": token}
    assert not token.get("optional")  # the admin listener is beyond loopback: never without a token
    [relabel] = [r for r in endpoint["relabelings"] if r.get("targetLabel") == "job"]
    assert relabel["replacement"] == "specwatch"
    template = one("Deployment")["spec"]["template"]
    assert one("PodMonitor")["spec"]["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()


def test_config_by_env_uses_only_variables_the_code_reads():
    unknown = {e["name"] for e in container()["env"] if e["name"].startswith("SPECWATCH_")} - KNOWN_VARS
    assert not unknown


def test_the_paths_are_the_proxys_real_routes(engines, proxy):  # noqa: F811 (fixtures)
    token = "d" * 24
    url, runtime = proxy({"k4": engines(FakeEngine(lookahead=4, accepted=2))}, sidecar_options={"token": token})
    probe = container()["readinessProbe"]["httpGet"]["path"]
    assert httpx.get(url + probe).status_code == 200  # anonymous, as the kubelet asks
    scrape = one("PodMonitor")["spec"]["podMetricsEndpoints"][0]["path"]
    assert httpx.get(runtime.admin + scrape).status_code == 401
    answer = httpx.get(runtime.admin + scrape, headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200 and "specwatch_proxy_pool_healthy" in answer.text
    assert "specwatch_" not in httpx.get(url + scrape).text  # the inference port's /metrics is the engine's


@pytest.mark.parametrize("bad", ["--admin-prot=8789", "--admin-port=http"])
def test_the_argument_check_has_power(bad):
    import typer

    with pytest.raises(typer.TyperException, match="admin-prot|valid integer"):
        parse(container()["args"] + [bad])


def test_the_grace_period_covers_the_drain_and_the_final_flush_and_the_engines_outlive_the_drain():
    from agent.runtime.lifecycle import Shutdown

    spec = one("Deployment")["spec"]["template"]["spec"]
    given = options()
    shutdown = Shutdown(drain=given["drain_seconds"], close=given["shutdown_seconds"])
    assert shutdown.drain >= 30  # in-flight streams get Kubernetes' default grace period at least

    def pre_stop(c: dict) -> float:
        command = c["lifecycle"]["preStop"]["exec"]["command"]
        assert command[0] == "sleep"
        return float(command[1])

    proxy_wait = pre_stop(container())
    assert spec["terminationGracePeriodSeconds"] >= proxy_wait + shutdown.total
    for engine in (c for c in spec["containers"] if c["name"] != "specwatch"):
        assert pre_stop(engine) >= proxy_wait + shutdown.drain, engine["name"]  # serving until drained
        assert pre_stop(engine) < spec["terminationGracePeriodSeconds"]
