"""`specwatch demo --real` as the operator runs it: the prepared model's world started, the story run
(agent/demo/real_run.py) with its events printed as they happen, the world stopped, and the end table."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from agent.demo.real_run import RealDemo, RealPlan, RealResult
from agent.demo.real_world import LiveWorld, WorldOptions


def run_real(plan: RealPlan, options: WorldOptions, screen: Console, work: Path | None = None) -> RealResult:
    """Start the pools and the proxy on the prepared model (ModelMissingError, FileNotFoundError or
    LlamaServerError when something is not installed), run the story, stop everything."""
    from agent.pretrained.prepare import Prepared

    model = Prepared.read("smollm2-135m")
    work = Path(work or tempfile.mkdtemp(prefix="specwatch-demo-real-"))
    say = lambda text: screen.print(text, highlight=False)  # noqa: E731
    began = time.perf_counter()
    say(f"starting llama-server pools (off, k3 draft, k8 n-gram) and specwatch proxy; files in {work}")
    world = LiveWorld(model, work, options, say=lambda text: say(f"  {text}"))
    try:
        demo = RealDemo(plan, world, note=say)
        demo.stages["set-up"] = time.perf_counter() - began
        result = demo.run()
    finally:
        world.close()
    result.stages["total"] = round(time.perf_counter() - began, 1)
    result.stages["set-up"] = round(result.stages.get("set-up", 0.0), 1)
    return result


def summary(result: RealResult) -> Table:
    table = Table(title="specwatch demo --real: per phase and domain (SmolLM2-135M behind llama.cpp and the proxy)",
                  header_style="bold", box=box.SIMPLE_HEAD, padding=(0, 1),
                  caption="pools: requests each pool served (off: no speculation, k3: the draft, k8: n-gram). "
                          "accept: accepted / drafted, the engine's counts. tok/s: generated tokens over request "
                          "wall time. fresh: the re-distilled draft.")
    for name in ("phase", "domain", "req", "pools", "accept", "tok/s"):
        table.add_column(name, justify="left" if name in ("phase", "domain", "pools") else "right", no_wrap=True)
    for r in result.rows:
        table.add_row(r["phase"], r["domain"], str(r["requests"]), r["pools"],
                      "" if r["acceptance"] is None else f"{r['acceptance']:.0%}", f"{r['tps']:.1f}")
    return table


def print_real(out: Console, result: RealResult) -> None:
    out.print(summary(result))
    g = result.guard
    if g:
        out.print(f"guard before the update ({g['title']}): below break-even: {', '.join(g['failed']) or 'none'}; "
                  + ", ".join(f"{r['domain']} {r['after']:.2f}" for r in g["rows"]), highlight=False)
    s = result.stale
    out.print(f"StaleDraft: {s['domain']} {s['delay']:.1f} s after the update, names v1 and v2: "
              f"{'yes' if s['names_both'] else 'no'}; {s['summary']}" if s else "StaleDraft: did not fire",
              highlight=False)
    m = result.moved
    out.print(f"moved: {m['from']} -> {m['to']} {m['seconds']:.0f} s into phase 2" if m else
              "moved: the stale domain stayed on its pool", highlight=False)
    d = result.distill
    if d:
        out.print(f"re-distilled: {d['steps']} steps on {sum(d['prompts'].values())} sampled prompts, loss "
                  f"{d['loss']}, {d['total_seconds']:.0f} s ({d['seconds']}), new draft {d['version'][:12]}",
                  highlight=False)
    out.print("speculation back on the stale domain: " + ("yes" if result.back else "no" if result.moved else
                                                           "it never left the draft pool"))
    out.print("stages (s): " + ", ".join(f"{k} {v:.0f}" for k, v in result.stages.items()), highlight=False)
