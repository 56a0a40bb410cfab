"""deploy/k8s renders (kubectl's kustomize) into objects valid for Kubernetes 1.29+ and the Prometheus Operator, with
one alert path by default; the PrometheusRule objects are what deploy/gen_prometheusrule.py makes of rules.yml.

Schemas, offline:
- Kubernetes kinds: PyPI kubernetes-validate (bundled Kubernetes JSON schemas), the strict variants
  (additionalProperties false, so a misspelt field fails), for 1.29 (native sidecars) and its newest.
- PodMonitor, PrometheusRule: tests/deploy/schemas/ (npm @kubernetes-models/prometheus-operator 4.0.0, from
  prometheus-operator v0.57.0's CRDs), checked with jsonschema. A CRD schema allows unknown fields (the API
  server prunes them, or rejects them under kubectl's default --validate=strict); `strict()` closes every
  object that lists its properties, as that field validation does.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
from importlib.resources import files
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml
from referencing import Registry, Resource

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
BASE = DEPLOY / "k8s"
COMPONENT = BASE / "components" / "prometheus-alerts"
OVERLAY = DEPLOY / "overlays" / "prometheus-alerts"
RULES = DEPLOY / "prometheus" / "rules.yml"
RUNBOOK = ROOT / "docs" / "runbook.md"
SCHEMAS = Path(__file__).with_name("schemas")
KUBERNETES_VERSIONS = ("1.29.0", kubernetes_validate.latest_version())
OBJECT_META = "https://kubernetes.io/api/_definitions.json#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
# The Prometheus rules for events the sidecar alerts on itself (alerts/alert.py's CATALOGUE), and the ones only
# Prometheus can evaluate.
ACCEPTANCE_ALERTS = {"SpecwatchAcceptanceDrop", "SpecwatchAcceptanceBelowDailyBaseline",
                     "SpecwatchAcceptanceBelowBreakEven", "SpecwatchSpeculationDisabled"}
HEALTH_ALERTS = {"SpecwatchDown", "SpecwatchAbsent", "SpecwatchNoSteps", "SpecwatchRingDropping",
                 "SpecwatchDatabaseUnreachable", "SpecwatchRecordsDeadLettered"}

KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason=(
    "kubectl not on PATH: it renders the kustomizations with its built-in kustomize (the machine image ships "
    "kubectl 1.32 with kustomize v5; Debian's kubernetes-client 1.20 is too old for components)"))


def kustomize(path: Path) -> list[dict]:
    result = subprocess.run([KUBECTL, "kustomize", str(path)], capture_output=True, timeout=120)
    assert result.returncode == 0, result.stderr.decode()
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@functools.cache
def rendered(path: Path) -> tuple[dict, ...]:
    return tuple(kustomize(path))


def one(objects, kind: str, name: str | None = None) -> dict:
    [found] = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    return found


def sidecar(objects) -> dict:
    spec = one(objects, "Deployment")["spec"]["template"]["spec"]
    [found] = [c for c in spec["initContainers"] if c["name"] == "specwatch"]
    return found


def alerts(objects) -> set[str]:
    return {rule["alert"] for o in objects if o["kind"] == "PrometheusRule"
            for group in o["spec"]["groups"] for rule in group["rules"] if "alert" in rule}


# --- schemas ---------------------------------------------------------------------------------------------

def strict(schema):
    """The schema with additionalProperties false on every object that lists its properties and says nothing
    of other ones (what kubectl's default strict field validation enforces for a custom resource)."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items()}
    if out.get("properties") and "additionalProperties" not in out \
            and not out.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


@functools.cache
def k8s_definitions(version: str) -> dict:
    path = files("kubernetes_validate") / "kubernetes-json-schema" / f"v{version}-local-strict" / "_definitions.json"
    return json.loads(path.read_text())


def crd_validator(kind: str, closed: bool = True) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMAS / f"monitoring.coreos.com_v1_{kind.lower()}.json").read_text())
    schema = strict(schema) if closed else schema
    schema["properties"]["metadata"] = {"$ref": OBJECT_META}  # was the package's own ObjectMeta id
    registry = Resource.from_contents(k8s_definitions(KUBERNETES_VERSIONS[-1])) @ Registry()
    return jsonschema.Draft202012Validator(schema, registry=registry)


def problems(obj: dict) -> list[str]:
    """Why ``obj`` is invalid, for every Kubernetes version checked; [] if it is valid."""
    if obj["apiVersion"] == "monitoring.coreos.com/v1":
        assert obj["kind"] in {"PodMonitor", "PrometheusRule"}, f"no schema for {obj['kind']}"
        return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in crd_validator(obj["kind"]).iter_errors(obj)]
    found = []
    for version in KUBERNETES_VERSIONS:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            found.append(f"{version}: {'/'.join(map(str, e.absolute_path))}: {e.message}")
    return found


# --- rendering and validity ------------------------------------------------------------------------------

@needs_kubectl
def test_the_base_renders_the_pod_its_service_and_monitoring():
    objects = rendered(BASE)
    assert sorted((o["kind"], o["metadata"]["name"]) for o in objects) == [
        ("Deployment", "llm"), ("PodMonitor", "specwatch"), ("PrometheusRule", "specwatch"), ("Service", "specwatch")]


@needs_kubectl
@pytest.mark.parametrize("path", [BASE, OVERLAY], ids=["base", "overlay-prometheus-alerts"])
def test_every_rendered_object_is_valid(path):
    objects = rendered(path)
    assert objects
    for obj in objects:
        assert problems(obj) == [], f"{obj['kind']}/{obj['metadata']['name']}"


def test_kubernetes_validation_fails_on_a_misspelt_field_and_a_wrong_type():
    deployment = next(d for d in yaml.safe_load_all((BASE / "deployment.yaml").read_text()) if d["kind"] == "Deployment")
    assert problems(deployment) == []
    misspelt = copy.deepcopy(deployment)
    init = misspelt["spec"]["template"]["spec"]["initContainers"][0]
    init["restartPolcy"] = init.pop("restartPolicy")
    assert any("restartPolcy" in p for p in problems(misspelt))
    wrong_type = copy.deepcopy(deployment)
    wrong_type["spec"]["template"]["spec"]["initContainers"][0]["ports"][0]["containerPort"] = "8790"
    assert any("containerPort" in p for p in problems(wrong_type))


def test_crd_validation_fails_on_a_misspelt_field_and_a_wrong_type():
    monitor = yaml.safe_load((BASE / "podmonitor.yaml").read_text())
    assert problems(monitor) == []
    misspelt = copy.deepcopy(monitor)
    endpoint = misspelt["spec"]["podMetricsEndpoints"][0]
    endpoint["prot"] = endpoint.pop("port")
    assert any("prot" in p for p in problems(misspelt))
    # The CRD's own schema lets the typo through; strict() is what catches it.
    assert list(crd_validator("PodMonitor", closed=False).iter_errors(misspelt)) == []
    rule = yaml.safe_load((BASE / "prometheusrule.yaml").read_text())
    assert problems(rule) == []
    wrong_type = copy.deepcopy(rule)
    wrong_type["spec"]["groups"][0]["rules"][0]["for"] = 5
    assert any("for" in p and "string" in p for p in problems(wrong_type))
    no_expr = copy.deepcopy(rule)
    del no_expr["spec"]["groups"][0]["rules"][0]["expr"]
    assert any("'expr' is a required property" in p for p in problems(no_expr))
    bad_name = copy.deepcopy(rule)
    bad_name["metadata"]["nmae"] = "x"  # ObjectMeta from the Kubernetes schemas, closed too
    assert any("nmae" in p for p in problems(bad_name))


# --- the pod ---------------------------------------------------------------------------------------------

@needs_kubectl
def test_the_sidecar_is_native_with_probes_and_resources():
    objects = rendered(BASE)
    c = sidecar(objects)
    assert c["restartPolicy"] == "Always"
    port = {p["name"]: p["containerPort"] for p in c["ports"]}["specwatch"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert int(env["SPECWATCH_PORT"]) == port and env["SPECWATCH_HOST"] == "0.0.0.0"
    paths = {kind: c[kind]["httpGet"]["path"] for kind in ("startupProbe", "livenessProbe", "readinessProbe")}
    assert paths == {"startupProbe": "/healthz", "livenessProbe": "/healthz", "readinessProbe": "/readyz"}
    assert all(c[kind]["httpGet"]["port"] in ("specwatch", port) for kind in paths)
    assert {"cpu", "memory"} <= set(c["resources"]["requests"]) and "memory" in c["resources"]["limits"]
    service = one(objects, "Service")
    template = one(objects, "Deployment")["spec"]["template"]
    assert service["spec"]["selector"].items() <= template["metadata"]["labels"].items()
    assert service["spec"]["ports"][0]["targetPort"] == "specwatch"


def test_the_probe_paths_are_the_sidecars_real_endpoints(tmp_path):
    # The app `specwatch serve` runs, asked on the probes' paths (and the PodMonitor's) without a token.
    from fastapi.testclient import TestClient

    from agent.http.serve import build
    from agent.runtime.config import SidecarConfig

    deployment = next(d for d in yaml.safe_load_all((BASE / "deployment.yaml").read_text()) if d["kind"] == "Deployment")
    [c] = [c for c in deployment["spec"]["template"]["spec"]["initContainers"] if c["name"] == "specwatch"]
    paths = {c[kind]["httpGet"]["path"] for kind in ("startupProbe", "livenessProbe", "readinessProbe")}
    paths.add(yaml.safe_load((BASE / "podmonitor.yaml").read_text())["spec"]["podMetricsEndpoints"][0]["path"])
    runtime = build(SidecarConfig(db=f"sqlite:///{tmp_path / 'h.db'}", pod="probe-test", token="t" * 24))
    try:
        with TestClient(runtime.app) as client:
            answers = {path: client.get(path).status_code for path in sorted(paths)}
            missing = client.get("/livez").status_code
    finally:
        runtime.close()
    assert answers == {"/healthz": 200, "/metrics": 200, "/readyz": 200}
    assert missing == 404  # the check can fail


@needs_kubectl
def test_the_base_drops_the_scrape_annotations():
    # deployment.yaml on its own is scraped by annotation; the base's PodMonitor replaces that, and the patch
    # removes the template's annotations whole, so they must be the prometheus.io ones only.
    deployment = next(d for d in yaml.safe_load_all((BASE / "deployment.yaml").read_text()) if d["kind"] == "Deployment")
    assert set(deployment["spec"]["template"]["metadata"]["annotations"]) == {
        "prometheus.io/scrape", "prometheus.io/port", "prometheus.io/path"}
    assert "annotations" not in one(rendered(BASE), "Deployment")["spec"]["template"]["metadata"]


@needs_kubectl
def test_the_podmonitor_scrapes_the_sidecar_as_job_specwatch():
    objects = rendered(BASE)
    monitor = one(objects, "PodMonitor")
    template = one(objects, "Deployment")["spec"]["template"]
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"  # kube-prometheus-stack's selector
    assert monitor["spec"]["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
    [endpoint] = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] in {p["name"] for p in sidecar(objects)["ports"]}
    assert endpoint["path"] == "/metrics"
    [relabel] = [r for r in endpoint["relabelings"] if r.get("targetLabel") == "job"]
    assert relabel["replacement"] == "specwatch" and relabel.get("action", "replace") == "replace"
    assert 'job="specwatch"' in RULES.read_text()
    for rule in (o for o in objects if o["kind"] == "PrometheusRule"):
        assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"


# --- the PrometheusRule objects and the alert path -------------------------------------------------------

def generator():
    spec = importlib.util.spec_from_file_location("gen_prometheusrule", DEPLOY / "gen_prometheusrule.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_prometheusrules_are_generated_from_rules_yml():
    gen = generator()
    built = gen.objects(yaml.safe_load(RULES.read_text()))
    for out in gen.OUTPUTS:
        assert out.path.read_text() == gen.render(out, built[out.name], gen.DEFAULT_RUNBOOK_BASE), (
            f"{out.path.relative_to(ROOT)} is out of date: run python deploy/gen_prometheusrule.py")
    assert gen.main(["--check"]) == 0
    # Every group of rules.yml, rule for rule, in exactly one object (runbook_url aside).
    source = yaml.safe_load(RULES.read_text())["groups"]
    emitted = [g for out in gen.OUTPUTS for g in yaml.safe_load(out.path.read_text())["spec"]["groups"]]
    assert sorted(g["name"] for g in emitted) == sorted(g["name"] for g in source)
    by_name = {g["name"]: g for g in emitted}
    for group in source:
        assert by_name[group["name"]] == group  # rules.yml carries the default runbook_url itself


def test_the_comparison_catches_a_changed_rule(tmp_path):
    gen = generator()
    changed = RULES.read_text().replace("expr: up{job=\"specwatch\"} == 0", "expr: up{job=\"specwatch\"} < 1")
    assert changed != RULES.read_text()
    (tmp_path / "rules.yml").write_text(changed)
    assert gen.main(["--check", "--rules", str(tmp_path / "rules.yml")]) == 1
    renamed = RULES.read_text().replace("name: specwatch.health", "name: specwatch.other")
    with pytest.raises(SystemExit, match="specwatch.other"):
        gen.objects(yaml.safe_load(renamed))


@needs_kubectl
def test_one_alert_path_by_default():
    base = rendered(BASE)
    # The sidecar sends its alerts to Alertmanager; Prometheus alerts only on what the sidecar cannot see.
    assert any(e["name"] == "SPECWATCH_ALERTMANAGER_URL" for e in sidecar(base)["env"])
    assert alerts(base) == HEALTH_ALERTS
    # The component switches: Prometheus' acceptance rules, and no Alertmanager sink in the sidecar.
    switched = rendered(OVERLAY)
    assert not any(e["name"] == "SPECWATCH_ALERTMANAGER_URL" for e in sidecar(switched)["env"])
    assert alerts(switched) == HEALTH_ALERTS | ACCEPTANCE_ALERTS
    everything = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "alert" in r}
    assert everything == HEALTH_ALERTS | ACCEPTANCE_ALERTS  # a new rule must be placed on one path
    # Only the sink goes: the rest of the sidecar is the same.
    strip = lambda c: {**c, "env": [e for e in c["env"] if e["name"] != "SPECWATCH_ALERTMANAGER_URL"]}  # noqa: E731
    assert strip(sidecar(base)) == sidecar(switched)


@needs_kubectl
def test_an_overlay_can_set_the_runbook_base(tmp_path):
    # docs/deployment.md's recipe: generate with --runbook-base into an overlay, use the files as patches.
    overlay = tmp_path / "overlay"
    assert generator().main(["--runbook-base", "https://wiki.example.com/specwatch/runbook.md",
                             "--out-dir", str(overlay)]) == 0
    rel = os.path.relpath(BASE, overlay)
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump({
        "resources": [rel], "components": [f"{rel}/components/prometheus-alerts"],
        "patches": [{"path": "prometheusrule.yaml"}, {"path": "prometheusrule-acceptance.yaml"}]}))
    objects = kustomize(overlay)
    urls = [r["annotations"]["runbook_url"] for o in objects if o["kind"] == "PrometheusRule"
            for g in o["spec"]["groups"] for r in g["rules"] if "alert" in r]
    assert len(urls) == len(HEALTH_ALERTS | ACCEPTANCE_ALERTS)
    assert all(u.startswith("https://wiki.example.com/specwatch/runbook.md#specwatch") for u in urls)
    assert sum(len(g["rules"]) for o in objects if o["kind"] == "PrometheusRule" for g in o["spec"]["groups"]) == \
        sum(len(g["rules"]) for g in yaml.safe_load(RULES.read_text())["groups"])  # replaced, not appended


# --- the runbook -----------------------------------------------------------------------------------------

def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors (lower case, punctuation but - and _ dropped, spaces to -)."""
    found = set()
    for line in path.read_text().splitlines():
        if m := re.match(r"#{1,6}\s+(.*)", line):
            text = m.group(1).replace("`", "").strip().lower()
            found.add(re.sub(r"[\x00-\x1f!-,./:-@\[-^`{-~]", "", text).replace(" ", "-"))
    return found


def test_every_alert_has_a_runbook_section():
    from alerts.alert import CATALOGUE

    sections = anchors(RUNBOOK)
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "alert" in r]
    for rule in rules:
        assert rule["annotations"]["runbook_url"] == f"docs/runbook.md#{rule['alert'].lower()}"
        assert rule["alert"].lower() in sections, rule["alert"]
    for name in CATALOGUE:  # the sidecar's own alerts
        assert name.lower() in sections, name


def command_problems(markdown: str) -> tuple[int, list[str]]:
    """(how many `specwatch ...` command lines the code in ``markdown`` holds, the ones that name a command,
    sub-command or option the CLI does not have)."""
    import typer

    from agent import cli

    if not cli.app.registered_commands:  # main() registers them (docs/gen_cli.py does the same)
        cli._register()
    root = typer.main.get_command(cli.app)
    code, fenced = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif fenced:
            code.append(line)
        else:
            code += re.findall(r"`([^`]+)`", line)
    found = re.findall(r"specwatch((?: [a-z][a-z-]*)+)((?: --?[a-z][a-z-]*(?:[ =][^\s-]\S*)?)*)", "\n".join(code))
    wrong = []
    for words, options in found:
        command, used = root, []
        for word in words.split():
            if word in getattr(command, "commands", {}):  # a group (typer's own click)
                command = command.commands[word]
                used.append(word)
        if not used:
            wrong.append(f"specwatch{words}: no such command")
            continue
        known = {o for p in command.params for o in p.opts}
        wrong += [f"specwatch {' '.join(used)}: no option {option}"
                  for option in re.findall(r"(?<!\S)--?[a-z][a-z-]*", options) if option not in known]
    return len(found), wrong


def test_the_runbooks_commands_exist():
    count, wrong = command_problems(RUNBOOK.read_text())
    assert count >= 20 and wrong == []


def test_the_command_check_catches_a_wrong_option_or_command():
    assert command_problems("`specwatch stats --domain code --by hour`")[1] == []
    assert command_problems("`specwatch stats --domian code`")[1] == ["specwatch stats: no option --domian"]
    assert command_problems("```sh\nspecwatch stat --since 1h\n```")[1] == ["specwatch stat: no such command"]
    assert command_problems("`specwatch models distill --target t-v2 --draft d --out d-v2`")[1] == []
