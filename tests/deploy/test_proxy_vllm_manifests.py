"""deploy/proxy-vllm: `specwatch proxy` in front of two vLLM Deployments (K = 4 and K = 0). Every object is
valid and the kustomization renders them; the proxy's arguments parse and name the vLLM Services; each vLLM
pool runs the draft length its pool name says, with the per-request metrics flag the proxy reads where it
drafts (vLLM refuses it without a draft), and the flags `specwatch recommend --engine vllm` writes for that
pool; the vLLM pods outlive the proxy's drain; and the proxy in front of stand-in vLLM pools of those names
records per request."""

from __future__ import annotations

import json
import re
from urllib.parse import urlsplit

import httpx
import pytest
import yaml

from agent.advice.pools import PoolPlan, configure
from agent.runtime.lifecycle import Shutdown
from tests.deploy.test_kustomize_render import DEPLOY, kustomize, needs_kubectl, problems
from tests.deploy.test_proxy_manifests import parse
from tests.proxy.conftest import engines, proxy  # noqa: F401 (fixtures)
from tests.proxy.standins import VllmStandIn
from tests.proxy.test_proxy import wait_for

HERE = DEPLOY / "proxy-vllm"
FLAG = "--per-request-spec-decode-metrics"


def objects() -> list[dict]:
    return [doc for name in ("vllm.yaml", "proxy.yaml", "podmonitor.yaml")
            for doc in yaml.safe_load_all((HERE / name).read_text()) if doc]


def named(kind: str, name: str) -> dict:
    [found] = [o for o in objects() if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def proxy_container() -> dict:
    return named("Deployment", "llm-vllm")["spec"]["template"]["spec"]["containers"][0]


def upstreams() -> dict[str, str]:
    return dict(u.split("=", 1) for u in parse(proxy_container()["args"])["upstream"])


def engine_args(service: str) -> list[str]:
    """The vLLM arguments of the Deployment behind ``service`` (its selector's pods)."""
    selector = named("Service", service)["spec"]["selector"]
    [deployment] = [o for o in objects() if o["kind"] == "Deployment"
                    and selector.items() <= o["spec"]["template"]["metadata"]["labels"].items()]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return container["args"]


def pool_problems(name: str, args: list[str]) -> list[str]:
    """What is wrong with a vLLM pool's arguments for the proxy pool ``name`` (kN or off)."""
    found = []
    options = dict(a.split("=", 1) for a in args if "=" in a)
    if name != "off" and options.get(FLAG) not in ("summary", "detailed"):
        found.append(f"{name}: {FLAG} summary|detailed missing")
    if name == "off" and FLAG in options:  # vLLM refuses it without --speculative-config (config/vllm.py)
        found.append(f"off: {FLAG} without a draft: vLLM does not start")
    config = options.get("--speculative-config")
    k = json.loads(config)["num_speculative_tokens"] if config else 0
    if k != (0 if name == "off" else int(name[1:])):
        found.append(f"{name}: drafts {k} tokens a step")
    return found


def test_every_object_is_valid():
    assert sorted((o["kind"], o["metadata"]["name"]) for o in objects()) == [
        ("Deployment", "llm-vllm"), ("Deployment", "vllm-k4"), ("Deployment", "vllm-off"),
        ("PodMonitor", "specwatch-proxy-vllm"), ("Service", "llm-vllm"), ("Service", "vllm-k4"),
        ("Service", "vllm-off")]
    for obj in objects():
        assert problems(obj) == [], f"{obj['kind']}/{obj['metadata']['name']}"


@needs_kubectl
def test_the_kustomization_renders_them():
    rendered = kustomize(HERE)
    assert sorted((o["kind"], o["metadata"]["name"]) for o in rendered) == sorted(
        (o["kind"], o["metadata"]["name"]) for o in objects())


def test_the_proxy_routes_to_the_vllm_services_and_each_pool_drafts_what_its_name_says():
    pools = upstreams()
    assert set(pools) == {"k4", "off"}
    for name, url in pools.items():
        host, port = urlsplit(url).hostname, urlsplit(url).port
        service = named("Service", host)
        assert [p["port"] for p in service["spec"]["ports"]] == [port]
        assert pool_problems(name, engine_args(host)) == []


def test_the_pool_check_has_power():
    args = engine_args("vllm-k4")
    assert pool_problems("k4", [a for a in args if not a.startswith(FLAG)]) == [
        f"k4: {FLAG} summary|detailed missing"]
    assert pool_problems("k8", args) == ["k8: drafts 4 tokens a step"]
    assert pool_problems("off", args) == [f"off: {FLAG} without a draft: vLLM does not start",
                                          "off: drafts 4 tokens a step"]


def test_the_vllm_flags_are_what_recommend_writes_for_the_pool():
    args = engine_args("vllm-k4")
    written = configure("vllm", PoolPlan("k4", 4, ("code",), False), "/models/draft").flags
    config = json.loads(re.search(r"'(.*)'", written).group(1))
    options = dict(a.split("=", 1) for a in args if "=" in a)
    assert json.loads(options["--speculative-config"]) == config
    assert f"{FLAG} {options[FLAG]}" in written
    assert configure("vllm", PoolPlan("off", 0, ("logs",), True)).flags == "no --speculative-config"
    assert not any(a.startswith("--speculative-config") for a in engine_args("vllm-off"))


def test_the_vllm_pods_serve_until_the_proxy_has_drained():
    spec = named("Deployment", "llm-vllm")["spec"]["template"]["spec"]
    given = parse(proxy_container()["args"])
    shutdown = Shutdown(drain=given["drain_seconds"], close=given["shutdown_seconds"])
    wait = float(proxy_container()["lifecycle"]["preStop"]["exec"]["command"][1])
    assert spec["terminationGracePeriodSeconds"] >= wait + shutdown.total
    for name in ("vllm-k4", "vllm-off"):
        pod = named("Deployment", name)["spec"]["template"]["spec"]
        sleep = float(pod["containers"][0]["lifecycle"]["preStop"]["exec"]["command"][1])
        assert wait + shutdown.drain <= sleep < pod["terminationGracePeriodSeconds"], name


def test_the_podmonitor_scrapes_the_proxy_admin_listener_with_the_token():
    [endpoint] = named("PodMonitor", "specwatch-proxy-vllm")["spec"]["podMetricsEndpoints"]
    c = proxy_container()
    assert {p["name"]: p["containerPort"] for p in c["ports"]}[endpoint["port"]] == parse(c["args"])["admin_port"]
    token = {e["name"]: e for e in c["env"]}["SPECWATCH_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert endpoint["authorization"]["credentials"] == token
    labels = named("Deployment", "llm-vllm")["spec"]["template"]["metadata"]["labels"]
    assert named("PodMonitor", "specwatch-proxy-vllm")["spec"]["selector"]["matchLabels"].items() <= labels.items()


@pytest.mark.parametrize("stream", [False, True])
def test_the_proxy_records_the_pools_per_request(engines, proxy, stream):  # noqa: F811 (fixtures)
    stand_ins = {name: VllmStandIn(0 if name == "off" else int(name[1:]), force_usage=True, seed=i)
                 for i, name in enumerate(upstreams())}
    url, runtime = proxy({name: engines(s) for name, s in stand_ins.items()})
    for i in range(8):
        answer = httpx.post(url + "/v1/completions", json={"prompt": "p", "max_tokens": 12, "stream": stream},
                            headers={"X-Specwatch-Domain": ("code", "logs")[i % 2]})
        assert answer.status_code == 200
    wait_for(lambda: len(runtime.taken) == 8)
    drafted = sum(s.draft_tokens for s in stand_ins.values())
    assert sum(r.drafted for r in runtime.taken) == drafted
    assert sum(r.accepted for r in runtime.taken) == sum(s.accepted for s in stand_ins.values())
    view = {p["name"]: p for p in httpx.get(runtime.admin + "/pools").json()["pools"]}
    assert {p["engine"] for p in view.values()} == {"vllm"} and not any(p["missing"] for p in view.values())
