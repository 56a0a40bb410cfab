"""The acceptance plot: acceptance over time per domain, speculation-off periods shaded, alerts and target
version changes marked. Matplotlib with the Agg backend (no display needed)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import PercentFormatter  # noqa: E402

from storage import History  # noqa: E402

GRAIN = {60: "per minute", 3600: "per hour", 86400: "per day"}
ALERT, VERSION = "#d62728", "#6a3d9a"


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, timezone.utc)


def render(history: History, path: Path, max_domains: int = 8) -> Path:
    """Draw ``history`` into a PNG at ``path``; only the ``max_domains`` busiest domains are drawn."""
    busiest = sorted(history.acceptance, key=lambda d: -sum(p.steps for p in history.acceptance[d]))
    shown = sorted(busiest[:max_domains])
    colours = {d: plt.get_cmap("tab10")(i % 10) for i, d in enumerate(shown)}
    fig, ax = plt.subplots(figsize=(13, 6), dpi=110)
    for domain in shown:
        points = history.acceptance[domain]
        # None (nothing drafted) breaks the line, so an off period shows as a gap.
        ax.plot([_dt(p.start + history.bucket_seconds / 2) for p in points],
                [float("nan") if p.acceptance is None else p.acceptance for p in points],
                color=colours[domain], lw=1.8, marker="o" if len(points) < 80 else None, ms=3,
                label=domain)
    for off in history.off:
        if off.domain in colours:
            ax.axvspan(_dt(off.start), _dt(off.end), color=colours[off.domain], alpha=0.14, lw=0)
            ax.text(_dt(off.start), 0.02, f" {off.domain} off", color=colours[off.domain], fontsize=8,
                    va="bottom", ha="left")
    for alert in history.alerts:
        ax.axvline(_dt(alert.starts_at), color=ALERT, lw=1.2, ls=":")
        name = alert.labels.get("alertname", "alert")
        where = alert.labels.get("domain")
        ax.annotate(f"{name} ({where})" if where else name, (_dt(alert.starts_at), 1.0),
                    xytext=(3, -2), textcoords="offset points", color=ALERT, fontsize=8, va="top",
                    rotation=90)
    for version in history.target_versions:
        ax.axvline(_dt(version.first_seen), color=VERSION, lw=1.2, ls="--")
        ax.annotate(f"target {version.version}", (_dt(version.first_seen), 1.0), xytext=(-3, -2),
                    textcoords="offset points", color=VERSION, fontsize=8, rotation=90, ha="right",
                    va="top")
    ax.set_xlim(_dt(history.since), _dt(history.until))
    ax.set_ylim(0, 1.02)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(ax.xaxis.get_major_locator()))
    ax.grid(alpha=0.3)
    ax.set_ylabel("acceptance rate (accepted / drafted)")
    ax.set_xlabel("time (UTC)")
    hidden = len(busiest) - len(shown)
    ax.set_title(f"Acceptance {GRAIN.get(history.bucket_seconds, '')} by domain, "
                 f"{_dt(history.since):%Y-%m-%d %H:%M} to {_dt(history.until):%Y-%m-%d %H:%M} UTC"
                 + (f" ({len(shown)} busiest of {len(busiest)} domains)" if hidden else ""))
    extra = [item for item, present in (
        (Patch(color="grey", alpha=0.25, label="speculation off\n(shaded in the domain's colour)"), history.off),
        (Line2D([], [], color=ALERT, ls=":", label="alert fired"), history.alerts),
        (Line2D([], [], color=VERSION, ls="--", label="target version change"), history.target_versions))
        if present]
    ax.legend(handles=ax.get_legend_handles_labels()[0] + extra, loc="upper left",
              bbox_to_anchor=(1.01, 1.0), frameon=False)
    if not shown:
        ax.text(0.5, 0.5, "no steps in this range", transform=ax.transAxes, ha="center", color="grey")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path
