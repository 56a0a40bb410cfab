"""Fine tiers packed into blocks: ``window_blocks`` and ``minute_blocks`` hold one series' hour of buckets
in one compact value (storage/blocks.py); ``tier_state.packed_until``; the windows get the by-series index
the other tiers have (a pack reads a range of series at a time). A ten-minute tier between minutes and hours.

On PostgreSQL the block tables are partitioned by UTC day (range on ``block_start``; partitions are made
as packing needs them), so retention drops a day instead of deleting its rows. Upgrading moves no row: the
pack job packs the history an hour per series range at a time once the schema is there. Downgrading
decodes every block back into rows of its tier.

The ten-minute tier starts at the first whole hour of the last day of minutes: those minutes are marked
for the next rollup, which builds their ten-minute rows (a day of a fleet, not the 30 a rollup of every
minute would read); before it the planner reads minutes and hours, as before.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

from storage.pack import unpack_all

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

TIERS = (("windows", "window_blocks"), ("minutes", "minute_blocks"))
COUNT = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
POSITIONS = 32
HOUR, DAY = 3600, 86400


def upgrade() -> None:
    for _, name in TIERS:
        key = ("block_start", "series_id")
        op.create_table(name, sa.Column(key[0], sa.BigInteger, nullable=False),
                        sa.Column(key[1], sa.Integer, nullable=False), sa.Column("data", sa.LargeBinary, nullable=False),
                        sa.PrimaryKeyConstraint(*key, name=f"pk_{name}"),
                        sa.ForeignKeyConstraint([key[1]], ["series.id"], name=f"fk_{name}_series_id_series"),
                        sqlite_with_rowid=False, postgresql_partition_by="RANGE (block_start)")
    with op.batch_alter_table("tier_state") as batch:
        batch.add_column(sa.Column("packed_until", sa.BigInteger, nullable=False, server_default="0"))
    op.create_index("ix_windows_series_id_bucket_start", "windows", ["series_id", "bucket_start"])
    _ten_minutes()


def _ten_minutes() -> None:
    op.create_table(
        "ten_minutes", sa.Column("bucket_start", sa.BigInteger, nullable=False),
        sa.Column("series_id", sa.Integer, nullable=False),
        *(sa.Column(c, COUNT, nullable=False) for c in ("steps", "drafted", "accepted", "emitted", "expected_n")),
        *(sa.Column(c, sa.Float, nullable=False) for c in ("expected_sum", "draft_seconds", "verify_seconds")),
        *(sa.Column(f"at_least_{i}", COUNT) for i in range(POSITIONS + 1)),
        sa.PrimaryKeyConstraint("bucket_start", "series_id", name="pk_ten_minutes"),
        sa.ForeignKeyConstraint(["series_id"], ["series.id"], name="fk_ten_minutes_series_id_series"),
        sqlite_with_rowid=False)
    op.create_index("ix_ten_minutes_series_id_bucket_start", "ten_minutes", ["series_id", "bucket_start"])
    conn = op.get_bind()
    available = conn.execute(sa.text("SELECT available_from FROM tier_state WHERE tier = 'minute'")).scalar() or 0
    latest = conn.execute(sa.text("SELECT max(bucket_start) FROM minutes")).scalar()
    first = -(-max(int(available), 0 if latest is None else int(latest) - DAY) // HOUR) * HOUR
    conn.execute(sa.text("INSERT INTO tier_state (tier, available_from, rolled_until, packed_until) "
                         "VALUES ('ten_minute', :a, 0, 0)"), {"a": first})
    conn.execute(sa.text(
        "INSERT INTO dirty (tier, bucket_start, shard, changes) "
        "SELECT DISTINCT 'ten_minute', (bucket_start / 600) * 600, 0, 1 FROM minutes WHERE bucket_start >= :first"),
        {"first": first})


def downgrade() -> None:
    conn = op.get_bind()
    op.execute("DELETE FROM dirty WHERE tier = 'ten_minute'")
    op.execute("DELETE FROM tier_state WHERE tier = 'ten_minute'")
    op.drop_index("ix_ten_minutes_series_id_bucket_start", table_name="ten_minutes")
    op.drop_table("ten_minutes")
    for tier, name in TIERS:
        unpack_all(conn, tier, name)
        op.drop_table(name)
    op.drop_index("ix_windows_series_id_bucket_start", "windows")
    with op.batch_alter_table("tier_state") as batch:
        batch.drop_column("packed_until")
