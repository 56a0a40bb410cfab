"""The four tiers of step history, finest first: windows -> minutes -> hours -> days."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from storage import schema
from storage.config import StoreConfig


@dataclass(frozen=True)
class Tier:
    name: str
    seconds: int  # bucket length
    retain: int  # seconds a row is kept (once the tier above covers it)
    table: sa.Table
    blocks: sa.Table | None = None  # where ended hours of a fine tier are packed (storage/pack.py)


def tiers(config: StoreConfig) -> tuple[Tier, Tier, Tier, Tier]:
    return (Tier("window", config.window_seconds, config.retain_windows, schema.windows, schema.window_blocks),
            Tier("minute", 60, config.retain_minutes, schema.minutes, schema.minute_blocks),
            Tier("hour", 3600, config.retain_hours, schema.hours),
            Tier("day", 86400, config.retain_days, schema.days))


TIER_NAMES = ("window", "minute", "hour", "day")
