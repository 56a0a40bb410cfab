"""deploy/grafana/specwatch.json: a well-formed dashboard whose PromQL names only exported metrics and parses."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import yaml

from promql_names import BUILTIN, PROMTOOL, exported_names, metric_names, needs_promtool

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "specwatch.json"
REQUIRED_PANELS = ["Acceptance ratio per domain", "Conditional acceptance per position", "Lookahead K",
                   "Speculation on/off", "Drift statistic", "Alerts firing", "Draft seconds", "Verify seconds"]


def load() -> dict:
    return json.loads(DASHBOARD.read_text())


def queries(dashboard: dict) -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in dashboard["panels"] for t in p.get("targets", [])]


def unknown_names(dashboard: dict) -> dict[str, set[str]]:
    defined = exported_names() | BUILTIN
    found = {title: metric_names(expr) - defined for title, expr in queries(dashboard)}
    return {title: names for title, names in found.items() if names}


def test_dashboard_structure():
    d = load()
    assert d["uid"] == "specwatch" and isinstance(d["schemaVersion"], int)
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert variables["domain"]["includeAll"] and variables["domain"]["multi"]
    assert "specwatch_steps_total" in variables["domain"]["query"]["query"]
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    for panel in d["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"] and set(panel["gridPos"]) == {"x", "y", "w", "h"}, panel["title"]
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24, panel["title"]
        assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"]), panel["title"]
    titles = " | ".join(p["title"] for p in d["panels"])
    for wanted in REQUIRED_PANELS:
        assert wanted in titles


def test_queries_filter_by_the_domain_variable():
    for title, expr in queries(load()):
        per_domain = {n for n in metric_names(expr) if n.startswith("specwatch_")} - {"specwatch_alerts_firing"}
        if per_domain:
            assert expr.count('domain=~"$domain"') == len(re.findall(r"specwatch_\w+", expr)), title


def test_panels_name_only_exported_metrics():
    assert unknown_names(load()) == {}


def test_a_typo_in_a_panel_is_caught():
    d = load()
    d["panels"][0]["targets"][0]["expr"] = d["panels"][0]["targets"][0]["expr"].replace(
        "specwatch_draft_tokens_total", "specwatch_drafted_tokens_total")
    assert unknown_names(d) == {d["panels"][0]["title"]: {"specwatch_drafted_tokens_total"}}


@needs_promtool
def test_panel_queries_parse(tmp_path):
    # Grafana's variables replaced by what they expand to; promtool then parses each query as a rule.
    expand = {"$__rate_interval": "5m", "$__range": "6h", "$__interval": "1m", "$domain": ".*"}
    rules = []
    for i, (title, expr) in enumerate(queries(load())):
        rules.append({"record": f"panel_{i}", "expr": re.sub(
            r"\$__rate_interval|\$__range|\$__interval|\$domain", lambda m: expand[m.group()], expr)})
    path = tmp_path / "panels.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": rules}]}))
    result = subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, timeout=60)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
