"""Requests by the load they met: ``load_hours``, one row per series, hour and load band (specwatch_core/loads.py),
for ``specwatch stats --by load`` and ``specwatch recommend``'s per-load schedules.

Upgrading creates the empty table (history before it has no load); downgrading drops it.

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

NAME = "load_hours"
COUNT = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    key = ("bucket_start", "series_id", "band")
    op.create_table(NAME, sa.Column(key[0], sa.BigInteger, nullable=False),
                    sa.Column(key[1], sa.Integer, nullable=False), sa.Column(key[2], sa.SmallInteger, nullable=False),
                    *(sa.Column(c, COUNT, nullable=False) for c in ("requests", "steps", "drafted", "accepted",
                                                                    "emitted")),
                    *(sa.Column(c, sa.Float, nullable=False) for c in ("seconds", "prompt_seconds")),
                    sa.PrimaryKeyConstraint(*key, name=f"pk_{NAME}"),
                    sa.ForeignKeyConstraint([key[1]], ["series.id"], name=f"fk_{NAME}_series_id_series"),
                    sqlite_with_rowid=False)


def downgrade() -> None:
    op.drop_table(NAME)
