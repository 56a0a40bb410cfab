"""Tables for a terminal of any width: short headers, low-value columns dropped (and named under the table)
when the rest would not fit, one free-text column wrapped instead of every column cut to "…".

CSV and JSON keep every column under its field name; only the table a person reads is fitted.
"""

from __future__ import annotations

from typing import Sequence

from rich.table import Table

# Table headers for field names (CSV and JSON keep the names).
HEADERS = {
    "acceptance_rate": "accept", "mean_accepted": "acc/step", "tokens_per_step": "tok/step",
    "draft_ms": "draft ms", "verify_ms": "verify ms", "expected_acceptance": "expected", "speedup": "speed-up",
    "target_version": "target", "draft_version": "draft", "lookahead": "K", "alertname": "alert",
    "severity": "severity", "starts_at": "started (UTC)", "ends_at": "ended (UTC)", "first_seen": "first seen",
    "last_seen": "last seen", "rows_deleted": "rows deleted", "tokens_per_second": "tok/s",
}
MIN_WRAP = 12  # the wrapped column keeps at least this many characters per line (it takes what is left)
BORDER = 3  # rich's " │ " between columns (and the outer edges, about as much)


def fitted(rows: list[dict], cells: list[list[str]], numeric: Sequence[bool], width: int,
           drop: Sequence[str] = (), wrap: str | None = None, title: str | None = None) -> Table:
    """A table of ``cells`` (rows of ``rows``' columns, already formatted) for ``width`` columns: columns in
    ``drop`` go first to last until the rest fit; ``wrap`` (free text) wraps at word breaks."""
    columns = list(rows[0]) if rows else []
    natural = {c: max([len(HEADERS.get(c, c))] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)}

    def needed(cols: list[str]) -> int:
        return sum(min(natural[c], MIN_WRAP) if c == wrap else natural[c] for c in cols) + BORDER * len(cols) + 1

    kept = list(columns)
    for name in drop:
        if needed(kept) <= width:
            break
        if name in kept:
            kept.remove(name)
    dropped = [c for c in columns if c not in kept]
    table = Table(title=title, caption=(f"not shown at {width} columns: {', '.join(HEADERS.get(c, c) for c in dropped)}"
                                        f" (--format csv or json has them)") if dropped else None)
    for c in kept:
        i = columns.index(c)
        table.add_column(HEADERS.get(c, c), justify="right" if numeric[i] else "left", no_wrap=c != wrap,
                         overflow="fold" if c == wrap else "ellipsis", min_width=min(natural[c], MIN_WRAP)
                         if c == wrap else natural[c])
    for r in cells:
        table.add_row(*(r[columns.index(c)] for c in kept))
    return table
