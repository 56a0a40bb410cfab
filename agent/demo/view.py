"""What the operator watches during a demo (rich renderables) and the summary table at the end."""

from __future__ import annotations

from rich import box
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from agent.demo.plan import PHASES, SHORT
from agent.demo.tally import Cell, Tally
from agent.runtime.times import iso


def _pct(x: float | None) -> str:
    return "" if x is None else f"{x:.0%}"


def _num(x: float | None, fmt: str = "{:.0f}") -> str:
    return "" if x is None else fmt.format(x)


def _speedup(x: float | None) -> Text:
    if x is None:
        return Text("")
    return Text(f"{x:.2f}x", style="green" if x >= 1.0 else "red")


def live(demo) -> Group:
    """Header, one row per domain (this phase), firing alerts, recent events."""
    phase, tally = demo.phase, demo.tally
    head = Text.assemble(
        ("specwatch demo ", "bold"), (f"phase {phase + 1}/3: {PHASES[phase]}  ", "cyan"),
        f"target {demo.target_version[:12]}  draft {demo.draft_version[:12]}  ",
        f"request {demo.done}/{demo.total}  {demo.elapsed():.0f}s  db {demo.db}")
    table = Table(expand=True, box=None, header_style="bold")
    for name, justify in (("domain", "left"), ("acceptance (recent)", "right"), ("K", "right"),
                          ("speculation", "left"), ("tok/s", "right"), ("target-only tok/s", "right"),
                          ("speed-up", "right"), ("policy's reason", "left")):
        table.add_column(name, justify=justify, no_wrap=name != "policy's reason", overflow="ellipsis")
    for domain in demo.plan.domains:
        cell = tally.cells.get((phase, domain), Cell())
        on = demo.speculating(domain)
        decision = demo.last_decision.get(domain)
        table.add_row(domain, _pct(tally.recent_acceptance(domain)),
                      str(decision.lookahead) if decision else "",
                      Text("on", style="green") if on else Text("OFF", style="bold red"),
                      _num(cell.tps), _num(cell.ref_tps), _speedup(cell.speedup),
                      decision.reason if decision else "")
    parts = [head, table]
    if demo.status:
        parts.append(Text(demo.status, style="yellow"))
    firing = demo.firing()
    if firing:
        alerts = Table(box=None, show_header=False, expand=True)
        for a in firing:
            labels = a.labels
            alerts.add_row(Text(labels["alertname"], style="bold red" if labels["severity"] == "critical"
                                else "bold yellow"), labels.get("domain", ""), labels["severity"],
                           a.annotations.get("summary", ""))
        parts.append(Panel(alerts, title="firing alerts", border_style="red"))
    if demo.events:
        parts.append(Panel(Text("\n".join(demo.events[-8:])), title="events", border_style="blue"))
    return Group(*parts)


def summary(tally: Tally, domains: list[str]) -> Table:
    """Per phase and domain: what ran and how fast, against the target alone."""
    table = Table(title="specwatch demo: per phase and domain", header_style="bold", box=box.SIMPLE_HEAD,
                  padding=(0, 1), caption="accept: accepted / drafted. K=0: steps not speculating. alone: the "
                                          "target alone on the same prompts, same phase. fresh: re-distilled draft.")
    for name in ("phase", "domain", "req", "accept", "mean K", "K=0", "tok/s", "alone", "speed-up"):
        table.add_column(name, justify="left" if name in ("phase", "domain") else "right", no_wrap=True)
    for phase, label in enumerate(SHORT):
        for domain in domains:
            c = tally.cells.get((phase, domain))
            if c is None:
                continue
            table.add_row(f"{phase + 1} {label}", domain, str(c.requests), _pct(c.acceptance),
                          _num(c.mean_lookahead, "{:.1f}"), _pct(c.plain_share), _num(c.tps), _num(c.ref_tps),
                          _speedup(c.speedup))
    return table


def summary_rows(tally: Tally, domains: list[str]) -> list[dict]:
    """The summary as plain rows (JSON output)."""
    rows = []
    for phase, label in enumerate(PHASES):
        for domain in domains:
            c = tally.cells.get((phase, domain))
            if c is not None:
                rows.append({"phase": phase + 1, "label": label, "domain": domain, "requests": c.requests,
                             "tokens": c.tokens, "acceptance_rate": c.acceptance, "mean_lookahead": c.mean_lookahead,
                             "plain_step_share": c.plain_share, "tokens_per_second": c.tps,
                             "target_only_tokens_per_second": c.ref_tps, "speedup": c.speedup})
    return rows


def result_json(result, domains: list[str]) -> dict:
    """The whole result as JSON: the summary rows, versions, pod, re-distillation, alerts, the hot path and
    the command that draws the run."""
    return {"rows": summary_rows(result.tally, domains), "versions": result.versions, "pod": result.pod,
            "distill": result.distill, "alerts": [a.to_dict() for a in result.alerts], "hot_path": result.hot_path,
            "plot_command": result.plot_command()}


def print_result(out: Console, result, domains: list[str]) -> None:
    """The summary table, the alerts raised, the sidecar's hot path, the time taken and how to draw the run."""
    out.print(summary(result.tally, domains))
    if result.alerts:
        out.print(f"[bold]alerts raised during the run[/] (specwatch alerts --db {result.db} --state all --since "
                  f"{iso(result.started)}):", highlight=False)
        for a in result.alerts:
            out.print(f"  {a.labels['alertname']:<20} {a.labels.get('domain', ''):<6} {a.state:<8} "
                      f"{a.annotations.get('summary', '')}", highlight=False)
    if result.hot_path:
        h = result.hot_path
        worker = h["worker_cpu_us_per_step"]
        out.print(f"sidecar hot path on the decoding thread (record + decide): median {h['median_us']:.1f} us, "
                  f"p99 {h['p99_us']:.1f} us over {h['steps']} steps"
                  + ("" if worker is None else f"; the ingest worker spent {worker:.1f} us of CPU per step"),
                  highlight=False)
    out.print(f"took {result.ended - result.started:.0f} s; every step is in {result.db} (pod {result.pod}).")
    out.print("Draw the run:")
    out.print(f"  {result.plot_command()}", highlight=False, soft_wrap=True)
