"""Tables fit the terminal: at 80 columns no line is longer and no header or value is cut to "…"; the
low-value columns leave (named under the table) and free text wraps; wide terminals keep every column.
Power: the plain rich table of before cuts headers and values to "…" at 80 columns."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from agent.cli.fit_table import fitted

STATS = [{"domain": d, "steps": 1327, "acceptance_rate": 0.963, "mean_accepted": 6.829, "tokens_per_step": 7.041,
          "draft_ms": 5.025, "verify_ms": 11.0, "expected_acceptance": 0.905, "speedup": 2.523}
         for d in ("code", "logs", "prose")]
ALERTS = [{"alertname": "SpeculationDisabled", "domain": "logs", "severity": "warning",
           "pod": "demo-20261125-234727", "state": "resolved", "starts_at": "11-25 23:47:53",
           "ends_at": "11-25 23:48:44", "summary": "Speculation turned off in logs: off: the policy ran K=0 for "
                                                   "30+ steps (K=0 174 tok/s)"}]


def render(table, width: int) -> str:
    console = Console(width=width, record=True, file=open("/dev/null", "w"))
    console.print(table)
    return console.export_text()


def table_of(rows, width, drop=(), wrap=None) -> str:
    cells = [[str(v) for v in r.values()] for r in rows]
    numeric = [isinstance(v, (int, float)) for v in rows[0].values()]
    return render(fitted(rows, cells, numeric, width, drop, wrap), width)


def test_stats_and_alerts_fit_80_columns_without_cutting():
    for rows, drop, wrap in ((STATS, ("expected_acceptance", "draft_ms", "verify_ms", "mean_accepted"), None),
                             (ALERTS, ("pod", "ends_at", "severity"), "summary")):
        out = table_of(rows, 80, drop, wrap)
        assert max(len(line) for line in out.splitlines()) <= 80, out
        assert "…" not in out, out
        assert "not shown at 80 columns" in out
    assert "K=0 174 tok/s" in table_of(ALERTS, 80, ("pod", "ends_at", "severity"), "summary").replace("\n", " ")


def test_a_wide_terminal_keeps_every_column():
    out = table_of(STATS, 200, ("expected_acceptance",))
    assert "not shown" not in out and "expected" in out and "draft ms" in out


def test_the_plain_table_of_before_cuts_at_80_columns():
    table = Table()
    for c in STATS[0]:
        table.add_column(c)
    for r in STATS:
        table.add_row(*(str(v) for v in r.values()))
    assert "…" in render(table, 80)
