"""Times on the command line: ``24h`` / ``7d`` / ``30m`` back from now, or ISO 8601; ISO 8601 UTC out."""

from __future__ import annotations

import re
from datetime import datetime, timezone

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")


def parse_time(text: str, now: float, option: str = "--since") -> float:
    """Unix seconds for ``24h`` (24 hours before ``now``), ``now``, or an ISO time (UTC if no offset)."""
    if text.strip().lower() == "now":
        return now
    match = _RELATIVE.match(text)
    if match:
        return now - float(match.group(1)) * UNITS[match.group(2)]
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{option}: expected a span back from now (30m, 24h, 7d) or an ISO time "
                         f"(2024-05-01T10:00Z), got {text!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


def iso(ts: float) -> str:
    """ISO 8601 in UTC with a Z, to the second."""
    return datetime.fromtimestamp(int(ts), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def span(seconds: float) -> str:
    """A short human length: 45s, 12m, 3h, 2d4h."""
    seconds = int(seconds)
    for unit, size, sub, sub_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60), ("m", 60, "s", 1)):
        if seconds >= size:
            rest = (seconds % size) // sub_size
            return f"{seconds // size}{unit}" + (f"{rest}{sub}" if rest else "")
    return f"{seconds}s"
