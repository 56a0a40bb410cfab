"""The acceptance plot: acceptance over time per domain, speculation-off periods shaded, alerts and target
and draft version changes marked, the time axis trimmed to what there is. Matplotlib with the Agg backend (no
display needed)."""

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

GRAIN = {10: "per 10 seconds", 60: "per minute", 300: "per 5 minutes", 3600: "per hour", 86400: "per day"}
ALERT, VERSION, DRAFT = "#d62728", "#6a3d9a", "#8c564b"


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
    for role, colour, style, versions in (("target", VERSION, "--", history.target_versions),
                                          ("draft", DRAFT, "-.", history.draft_versions)):
        for version in versions:
            ax.axvline(_dt(version.first_seen), color=colour, lw=1.2, ls=style)
            ax.annotate(f"{role} {version.version}", (_dt(version.first_seen), 0.5), xytext=(-3, 0),
                        textcoords="offset points", color=colour, fontsize=8, rotation=90, ha="right",
                        va="center")
    ax.set_xlim(*(_dt(t) for t in _extent(history)))
    ax.set_ylim(0, 1.02)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(ax.xaxis.get_major_locator()))
    ax.grid(alpha=0.3)
    ax.set_ylabel("acceptance rate (accepted / drafted)")
    ax.set_xlabel("time (UTC)")
    hidden = len(busiest) - len(shown)
    start, end = _extent(history)
    ax.set_title(f"Acceptance {GRAIN.get(history.bucket_seconds, '')} by domain, "
                 f"{_dt(start):%Y-%m-%d %H:%M:%S} to {_dt(end):%Y-%m-%d %H:%M:%S} UTC"
                 + (f" ({len(shown)} busiest of {len(busiest)} domains)" if hidden else ""))
    extra = [item for item, present in (
        (Patch(color="grey", alpha=0.25, label="speculation off\n(shaded in the domain's colour)"), history.off),
        (Line2D([], [], color=ALERT, ls=":", label="alert fired"), history.alerts),
        (Line2D([], [], color=VERSION, ls="--", label="target version change"), history.target_versions),
        (Line2D([], [], color=DRAFT, ls="-.", label="draft version change"), history.draft_versions))
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


def _extent(history: History) -> tuple[float, float]:
    """The time range to draw: the first to the last bucket with steps, widened to the marks (off periods,
    alerts, version changes) inside the query's range; the whole range when there is nothing."""
    times = [t for points in history.acceptance.values() for p in points
             for t in (p.start, p.start + history.bucket_seconds)]
    times += [t for off in history.off for t in (off.start, off.end)]
    times += [a.starts_at for a in history.alerts]
    times += [v.first_seen for v in (*history.target_versions, *history.draft_versions)]
    times = [t for t in times if history.since <= t <= history.until]
    if not times:
        return history.since, history.until
    start, end = min(times), max(times)
    pad = max((end - start) * 0.02, history.bucket_seconds / 2)
    return max(history.since, start - pad), min(history.until, end + pad)
