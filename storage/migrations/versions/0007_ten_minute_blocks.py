"""The ten-minute tier packed into blocks too: ``ten_minute_blocks`` holds one series' hour of ten-minute
buckets in one value (storage/blocks.py), partitioned by UTC day on PostgreSQL like the other block tables.
Its rows had been a quarter of a pod-day's bytes (1.4 of 6.0 MB) for six buckets an hour.

Upgrading moves no row: the pack job packs the ten-minute tier's ended hours with the others'. Downgrading
decodes every block back into rows of the tier.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

from storage.pack import unpack_all

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

NAME = "ten_minute_blocks"


def upgrade() -> None:
    key = ("block_start", "series_id")
    op.create_table(NAME, sa.Column(key[0], sa.BigInteger, nullable=False),
                    sa.Column(key[1], sa.Integer, nullable=False), sa.Column("data", sa.LargeBinary, nullable=False),
                    sa.PrimaryKeyConstraint(*key, name=f"pk_{NAME}"),
                    sa.ForeignKeyConstraint([key[1]], ["series.id"], name=f"fk_{NAME}_series_id_series"),
                    sqlite_with_rowid=False, postgresql_partition_by="RANGE (block_start)")


def downgrade() -> None:
    unpack_all(op.get_bind(), "ten_minutes", NAME)
    op.drop_table(NAME)
    op.execute("UPDATE tier_state SET packed_until = 0 WHERE tier = 'ten_minute'")
