"""Per-tier bookkeeping: how far back a tier is complete, how far rollups have covered it, and how far its
hours are packed into blocks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import sqlalchemy as sa

from storage import schema
from storage.sql import upsert
from storage.tiers import Tier


@dataclass
class TierState:
    available_from: int = 0  # rows before this may have been pruned
    rolled_until: int = 0  # buckets ending at or before this were rolled up from the tier below
    packed_until: int = 0  # hours before this are in blocks (storage/pack.py); late rows may wait beside


FIELDS = tuple(f.name for f in fields(TierState))


def load_state(conn: sa.Connection, chain: tuple[Tier, ...]) -> dict[str, TierState]:
    t = schema.tier_state.c
    stored = {r.tier: TierState(r.available_from, r.rolled_until, r.packed_until)
              for r in conn.execute(sa.select(t.tier, *(t[f] for f in FIELDS)))}
    return {tier.name: stored.get(tier.name, TierState()) for tier in chain}


def save_state(conn: sa.Connection, state: dict[str, TierState], owned: Sequence[str]) -> None:
    """Store the fields ``owned`` by the calling job only: rollups, retention and packing run at the same
    time (each under its own lock), and one must not put back another's field as it read it."""
    upsert(conn, schema.tier_state, [dict(tier=name, **{f: getattr(s, f) for f in FIELDS})
                                     for name, s in sorted(state.items())],
           ["tier"], set_={f: (lambda x, f=f: x[f]) for f in owned})
