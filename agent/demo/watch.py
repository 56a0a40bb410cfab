"""``specwatch demo``'s run as the operator watches it: the model kit (installed first when it is not
cached), torch's threads, then the run (agent/demo/run.py) under a live view (agent/demo/view.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from rich.console import Console
from rich.live import Live

from agent.demo.plan import DemoPlan
from agent.demo.run import Demo, DemoResult
from agent.demo.view import live
from agent.kit import layout
from agent.kit.load import load_kit
from agent.kit.shipped import manifest_for
from agent.kit.specs import get_spec
from specwatch_core import settings

Install = Callable[[str, Console], None]  # (kit size, where its progress goes): builds the kit


class Interrupted(Exception):
    """Ctrl-C during the run: what was recorded so far is in the database."""


def watch(plan: DemoPlan, db: str, *, screen: Console, install: Install, alerts_log: Path | None = None,
          threads: int = 1) -> DemoResult:
    """Run the demo on ``db`` under a live view on ``screen``. ``install`` builds the kit when it is missing
    (from the shipped weights); ``threads``: torch CPU threads (0: torch's default). KitNotBuiltError when
    the kit still cannot be loaded; Interrupted on Ctrl-C during the run."""
    manifest = layout.read_manifest(layout.kit_dir(plan.size))
    if manifest is None or not manifest.get("complete"):
        how = ("from the weights shipped in the repository" if manifest_for(get_spec(plan.size)) else
               "by training it (no shipped weights for this kit spec)")
        screen.print(f"[bold]installing the {plan.size} model kit first[/] {how} (once; cached under "
                     f"{settings.home()})")
        install(plan.size, screen)
    kit = load_kit(plan.size, device=settings.device())
    if threads:
        import torch

        torch.set_num_threads(threads)
    with Live(console=screen, refresh_per_second=4, transient=False) as view:
        runner = Demo(plan, kit, db, home=settings.home(), alerts_log=alerts_log,
                      redraw=lambda: view.update(live(runner)))
        try:
            result = runner.run()
        except KeyboardInterrupt:
            view.stop()
            raise Interrupted() from None
        view.update(live(runner))
    return result
