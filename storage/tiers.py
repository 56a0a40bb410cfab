"""The six tiers of step history, finest first: windows -> minutes -> ten minutes -> hours -> days -> weeks.

Ten-minute buckets are kept as long as minutes (``retain_minutes``). They are there for the queries: at the
end of an hour, a range that reaches the present read up to 59 minutes of minute rows for every series
(1.3 million rows at 1000 pods), and now reads at most five ten-minute rows and nine minute rows each. Their
ended hours are packed into blocks like those of the finer tiers (schema 0007).

Weeks (schema 0009) are there for the same reason one level up: ``--since 30d`` read 30 day rows of every
series (660,000 at 1000 pods, most of the query's time) and now reads four or five week rows and the days at
the range's edges. A week is 7 days from the epoch (Thursday 00:00 UTC to the next), rolled up once it has
ended, and kept as long as days (``retain_days``)."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from storage import schema
from storage.config import DAY, StoreConfig

WEEK = 7 * DAY


@dataclass(frozen=True)
class Tier:
    name: str
    seconds: int  # bucket length
    retain: int  # seconds a row is kept (once the tier above covers it)
    table: sa.Table
    blocks: sa.Table | None = None  # where ended hours of a fine tier are packed (storage/pack.py)


def tiers(config: StoreConfig) -> tuple[Tier, ...]:
    return (Tier("window", config.window_seconds, config.retain_windows, schema.windows, schema.window_blocks),
            Tier("minute", 60, config.retain_minutes, schema.minutes, schema.minute_blocks),
            Tier("ten_minute", 600, config.retain_minutes, schema.ten_minutes, schema.ten_minute_blocks),
            Tier("hour", 3600, config.retain_hours, schema.hours),
            Tier("day", DAY, config.retain_days, schema.days),
            Tier("week", WEEK, config.retain_days, schema.weeks))


TIER_NAMES = ("window", "minute", "ten_minute", "hour", "day", "week")
