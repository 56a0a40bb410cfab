"""Every table of the store, in one place (SQLAlchemy Core). Migrations in storage/migrations/ build it.

Step history lives in six tiers of the same shape: ``windows`` (a few seconds), ``minutes``,
``ten_minutes``, ``hours``, ``days`` (UTC days: a month of a fleet is 30 rows per series, not 720) and
``weeks`` (7 days from the epoch, so Thursday 00:00 UTC: a month is four or five of them and the days at its
edges). A row holds sums and counts
for one series in one bucket, never averages. Per-position counts are in the same row: ``at_least_i`` is
the number of per-step records that accepted at least i drafted tokens, for i = 0..K of the series' K, and
NULL above it (PostgreSQL stores a NULL as one bit); a series of K over 32 (up to 64) counts i = 0..32 only. Position i was reached ``at_least_{i-1}`` times and
accepted ``at_least_i`` times. A row per drafted position reached had been 60% of the bytes of a fleet.
"""

from __future__ import annotations

import sqlalchemy as sa

from storage.counts import POSITIONS

metadata = sa.MetaData(naming_convention={
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
})

TEXT = 128
# Counts are 8-byte: an hour of aggregate records (MAX_STEPS verification passes of K drafted tokens each)
# passes 2^31 in one row. SQLite's INTEGER is 8 bytes already, so it keeps that name there.
COUNT = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

series = sa.Table(
    "series", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("domain", sa.String(256), nullable=False),
    sa.Column("lookahead", sa.Integer, nullable=False),
    sa.Column("target_version", sa.String(TEXT), nullable=False),
    sa.Column("draft_version", sa.String(TEXT), nullable=False),
    sa.Column("pod", sa.String(TEXT), nullable=False),
    sa.UniqueConstraint("domain", "lookahead", "target_version", "draft_version", "pod"),
)

COUNT_COLUMNS = ("steps", "drafted", "accepted", "emitted", "expected_n")
SUM_COLUMNS = ("expected_sum", "draft_seconds", "verify_seconds")
AT_LEAST = tuple(f"at_least_{i}" for i in range(POSITIONS + 1))
VALUE_COLUMNS = (*COUNT_COLUMNS, *SUM_COLUMNS, *AT_LEAST)


def _tier(name: str) -> sa.Table:
    """A tier's table (counts: ``COUNT``)."""
    table = sa.Table(
        name, metadata,
        sa.Column("bucket_start", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("series_id", sa.Integer, sa.ForeignKey("series.id"), primary_key=True,
                  autoincrement=False),
        *(sa.Column(c, COUNT, nullable=False) for c in COUNT_COLUMNS),
        *(sa.Column(c, sa.Float, nullable=False) for c in SUM_COLUMNS),
        *(sa.Column(c, COUNT) for c in AT_LEAST),
        sqlite_with_rowid=False,
    )
    # By series: a pack reads one range of series at a time (the windows' since schema 0006).
    sa.Index(None, table.c.series_id, table.c.bucket_start)
    return table


windows = _tier("windows")
minutes = _tier("minutes")
ten_minutes = _tier("ten_minutes")
hours = _tier("hours")
days = _tier("days")
weeks = _tier("weeks")

# Blocks (storage/blocks.py): a fine tier's (windows, minutes, ten minutes) buckets of one series and hour
# in one compact value, once the hour is over and rolled up (storage/pack.py). The tier's own table keeps the hours not yet packed, and
# any late row for a packed hour, which wins over the block's bucket until the next pack merges it in. On
# PostgreSQL the blocks are partitioned by UTC day, so retention drops a day instead of deleting rows.
BLOCK_SECONDS = 3600


def _blocks(name: str) -> sa.Table:
    return sa.Table(
        name, metadata,
        sa.Column("block_start", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("series_id", sa.Integer, sa.ForeignKey("series.id"), primary_key=True, autoincrement=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
        sqlite_with_rowid=False,
        postgresql_partition_by="RANGE (block_start)",
    )


window_blocks = _blocks("window_blocks")
minute_blocks = _blocks("minute_blocks")
ten_minute_blocks = _blocks("ten_minute_blocks")  # six buckets a block: a row each had cost 1.4 MB a pod-day

# Buckets of a tier whose rows are older than the tier below (written since the last rollup).
# ``changes`` counts writes, so a rollup clears only the marks nobody touched while it ran. A writer
# bumps the mark of its ``shard`` (from its pod name): with one mark per bucket, every pod's flush in a
# minute waited for the previous one's commit on that one row.
DIRTY_SHARDS = 64
# Requests by the load they met (specwatch_core/loads.py bands), an hour per row: what the proxy and engines that
# say the load of each request recorded. A few rows a series and hour (the bands its load visited).
load_hours = sa.Table(
    "load_hours", metadata,
    sa.Column("bucket_start", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("series_id", sa.Integer, sa.ForeignKey("series.id"), primary_key=True, autoincrement=False),
    sa.Column("band", sa.SmallInteger, primary_key=True, autoincrement=False),
    *(sa.Column(c, COUNT, nullable=False) for c in ("requests", "steps", "drafted", "accepted", "emitted")),
    *(sa.Column(c, sa.Float, nullable=False) for c in ("seconds", "prompt_seconds")),
    sqlite_with_rowid=False,
)

dirty = sa.Table(
    "dirty", metadata,
    sa.Column("tier", sa.String(16), primary_key=True),
    sa.Column("bucket_start", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("shard", sa.SmallInteger, primary_key=True, autoincrement=False, server_default="0"),
    sa.Column("changes", sa.Integer, nullable=False),
)

# Per tier: rows before ``available_from`` may have been pruned; buckets ending at or before
# ``rolled_until`` have been rolled up from the tier below (the watermark); hours before ``packed_until``
# have been packed into blocks (a fine tier; late rows may still wait in the tier's table).
tier_state = sa.Table(
    "tier_state", metadata,
    sa.Column("tier", sa.String(16), primary_key=True),
    sa.Column("available_from", sa.BigInteger, nullable=False),
    sa.Column("rolled_until", sa.BigInteger, nullable=False),
    sa.Column("packed_until", sa.BigInteger, nullable=False, server_default="0"),
)

model_versions = sa.Table(
    "model_versions", metadata,
    sa.Column("pod", sa.String(TEXT), primary_key=True),
    sa.Column("role", sa.String(16), primary_key=True),  # target or draft
    sa.Column("version", sa.String(TEXT), primary_key=True),
    sa.Column("first_seen", sa.Float, nullable=False),
    sa.Column("last_seen", sa.Float, nullable=False),
)

def _event(name: str, *columns: sa.Column, index: tuple[str, ...]) -> sa.Table:
    """An event table: when, which pod and domain, then the event's own columns."""
    return sa.Table(
        name, metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("ts", sa.Float, nullable=False),
        sa.Column("pod", sa.String(TEXT), nullable=False),
        sa.Column("domain", sa.String(256), nullable=False),
        *columns,
        sa.Index(None, *index),
    )


transitions = _event("transitions", sa.Column("enabled", sa.Boolean, nullable=False),
                     sa.Column("reason", sa.Text, nullable=False), index=("domain", "ts"))

decisions = _event("decisions", sa.Column("lookahead", sa.Integer, nullable=False),
                   sa.Column("speculate", sa.Boolean, nullable=False),
                   sa.Column("policy", sa.String(TEXT), nullable=False),
                   sa.Column("reason", sa.Text, nullable=False), index=("pod", "domain", "ts"))

alerts = sa.Table(
    "alerts", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("fingerprint", sa.String(64), nullable=False),  # hash of the labels
    sa.Column("alertname", sa.String(256), nullable=False),
    sa.Column("labels", sa.Text, nullable=False),  # JSON object
    sa.Column("annotations", sa.Text, nullable=False),  # JSON object
    sa.Column("starts_at", sa.Float, nullable=False),
    sa.Column("ends_at", sa.Float),  # set when resolved
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.UniqueConstraint("fingerprint", "starts_at"),
    sa.Index(None, "ends_at"),
)
