"""Dirty marks per shard of writers: ``dirty`` gains ``shard`` in its primary key.

Every flush bumps the mark of the minute it wrote, and holds that row's lock until it commits (through
the commit's WAL flush). With one mark per minute, a fleet's flushes in the same minute ran one after
the other: 1000 pods queued on one row. A writer now bumps the mark of its shard (from its pod name, one
of 64); the rollup reads and clears every shard's mark of a bucket. Existing marks become shard 0.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("dirty") as batch:
        batch.add_column(sa.Column("shard", sa.SmallInteger, nullable=False, server_default="0"))
        batch.drop_constraint("pk_dirty", type_="primary")
        batch.create_primary_key("pk_dirty", ["tier", "bucket_start", "shard"])


def downgrade() -> None:
    conn = op.get_bind()
    # One mark per bucket again: the shards' counts summed.
    rows = conn.execute(sa.text("SELECT tier, bucket_start, SUM(changes) FROM dirty "
                                "GROUP BY tier, bucket_start")).all()
    conn.execute(sa.text("DELETE FROM dirty"))
    with op.batch_alter_table("dirty") as batch:
        batch.drop_constraint("pk_dirty", type_="primary")
        batch.drop_column("shard")
        batch.create_primary_key("pk_dirty", ["tier", "bucket_start"])
    if rows:
        conn.execute(sa.text("INSERT INTO dirty (tier, bucket_start, changes) VALUES (:t, :b, :c)"),
                     [dict(t=t, b=b, c=int(c)) for t, b, c in rows])
