"""Per-tier bookkeeping: how far back a tier is complete, and how far rollups have covered it."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from storage import schema
from storage.sql import upsert
from storage.tiers import Tier


@dataclass
class TierState:
    available_from: int = 0  # rows before this may have been pruned
    rolled_until: int = 0  # buckets ending at or before this were rolled up from the tier below


def load_state(conn: sa.Connection, chain: tuple[Tier, ...]) -> dict[str, TierState]:
    t = schema.tier_state.c
    stored = {r.tier: TierState(r.available_from, r.rolled_until)
              for r in conn.execute(sa.select(t.tier, t.available_from, t.rolled_until))}
    return {tier.name: stored.get(tier.name, TierState()) for tier in chain}


def save_state(conn: sa.Connection, state: dict[str, TierState]) -> None:
    upsert(conn, schema.tier_state, [dict(tier=name, available_from=s.available_from,
                                          rolled_until=s.rolled_until) for name, s in sorted(state.items())],
           ["tier"])
