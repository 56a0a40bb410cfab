"""Helpers of the HTTP API tests."""

from __future__ import annotations

import math

from storage import StatsQuery


def stored_steps(sidecar) -> int:
    """Steps the database holds once everything counted is flushed."""
    sidecar.flush(math.inf)
    return sum(r["steps"] for r in sidecar.store.stats(StatsQuery(by=("domain",))).rows)
