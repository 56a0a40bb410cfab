"""Write the Prometheus Operator's PrometheusRule objects from deploy/prometheus/rules.yml, so the two never differ.

    python deploy/gen_prometheusrule.py                 # rewrite the committed files
    python deploy/gen_prometheusrule.py --check         # exit 1 if they are not what rules.yml gives
    python deploy/gen_prometheusrule.py --runbook-base https://wiki.example.com/specwatch/runbook.md \\
        --out-dir my-overlay/                            # the same objects with your runbook links

Each group of rules.yml goes to one object (GROUPS below; a group not listed there is an error):
- deploy/k8s/prometheusrule.yaml (kustomize base): specwatch.health, what only Prometheus can see.
- deploy/k8s/components/prometheus-alerts/prometheusrule.yaml (opt-in component): specwatch.recording and
  specwatch.acceptance, the events the sidecar alerts on itself by default.

Every alert's annotation runbook_url becomes ``<runbook base>#<alertname in lower case>`` (the anchor of the
alert's section in docs/runbook.md); the default base is ``docs/runbook.md``, as in rules.yml. With
--out-dir the two files are written there (prometheusrule.yaml, prometheusrule-acceptance.yaml): an overlay
lists them under `patches:`, and as strategic-merge patches of custom resources they replace the base's
rule groups whole.
"""

from __future__ import annotations

import argparse
import copy
import sys
import textwrap
from pathlib import Path

import yaml

DEPLOY = Path(__file__).resolve().parent
RULES = DEPLOY / "prometheus" / "rules.yml"
DEFAULT_RUNBOOK_BASE = "docs/runbook.md"
# kube-prometheus-stack's Prometheus selects PrometheusRules (like PodMonitors) by `release: <Helm release>`
# unless its ruleSelectorNilUsesHelmValues is false; kube-prometheus-stack is the release name its docs use.
LABELS = {"app.kubernetes.io/name": "specwatch", "release": "kube-prometheus-stack"}


class Output:
    def __init__(self, name: str, path: Path, out_name: str, groups: tuple[str, ...], what: str):
        self.name, self.path, self.out_name, self.groups, self.what = name, path, out_name, groups, what


OUTPUTS = (
    Output("specwatch", DEPLOY / "k8s" / "prometheusrule.yaml", "prometheusrule.yaml", ("specwatch.health",),
           "the rules only Prometheus can evaluate (the sidecar down, absent, fed nothing, dropping steps); "
           "always on, in the kustomize base"),
    Output("specwatch-acceptance", DEPLOY / "k8s" / "components" / "prometheus-alerts" / "prometheusrule.yaml",
           "prometheusrule-acceptance.yaml", ("specwatch.recording", "specwatch.acceptance"),
           "acceptance alerts the sidecar raises itself by default; opt-in with the prometheus-alerts "
           "component, which also turns the sidecar's Alertmanager sink off"),
)
GROUPS = {group: out for out in OUTPUTS for group in out.groups}


def runbook_url(base: str, alertname: str) -> str:
    return f"{base}#{alertname.lower()}"


def objects(rules: dict, runbook_base: str = DEFAULT_RUNBOOK_BASE) -> dict[str, dict]:
    """PrometheusRule objects by output name, from the parsed rules.yml."""
    unknown = [g["name"] for g in rules["groups"] if g["name"] not in GROUPS]
    if unknown:
        raise SystemExit(f"rules.yml groups without an output in {Path(__file__).name}'s OUTPUTS: {unknown}")
    found: dict[str, list[dict]] = {out.name: [] for out in OUTPUTS}
    for group in rules["groups"]:
        group = copy.deepcopy(group)
        for rule in group["rules"]:
            if "alert" in rule:
                rule.setdefault("annotations", {})["runbook_url"] = runbook_url(runbook_base, rule["alert"])
        found[GROUPS[group["name"]].name].append(group)
    return {out.name: {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": out.name, "labels": dict(LABELS)},
        "spec": {"groups": found[out.name]},
    } for out in OUTPUTS}


def render(out: Output, obj: dict, runbook_base: str) -> str:
    regenerate = "python deploy/gen_prometheusrule.py" + (
        f" --runbook-base {runbook_base}" if runbook_base != DEFAULT_RUNBOOK_BASE else "")
    header = (f"# Generated from deploy/prometheus/rules.yml by `{regenerate}`: edit rules.yml and\n"
              f"# regenerate, never this file (tests/deploy/test_kustomize_render.py compares the two).\n"
              + textwrap.fill(f"Groups {', '.join(out.groups)}: {out.what}.", 108, initial_indent="# ",
                              subsequent_indent="# ") + "\n")
    return header + yaml.safe_dump(obj, sort_keys=False, width=110, allow_unicode=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rules", type=Path, default=RULES, help="rules file (default: %(default)s)")
    parser.add_argument("--runbook-base", default=DEFAULT_RUNBOOK_BASE,
                        help="runbook URL without the #anchor (default: %(default)s)")
    parser.add_argument("--out-dir", type=Path, help="write both files here instead of their places in deploy/k8s")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file would change")
    args = parser.parse_args(argv)
    built = objects(yaml.safe_load(args.rules.read_text()), args.runbook_base)
    stale = []
    for out in OUTPUTS:
        path = args.out_dir / out.out_name if args.out_dir else out.path
        text = render(out, built[out.name], args.runbook_base)
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")
    if stale:
        print("out of date (run python deploy/gen_prometheusrule.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
