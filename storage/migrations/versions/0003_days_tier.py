"""A days tier above hours: ``days`` and ``day_positions``, rolled up from hours like the other tiers.

A month of a fleet read from hours is 720 rows per series (15 million for 1000 pods x 20 domains); from
days it is 30. Existing hour rows are marked for the first rollup, which builds their days; until then the
planner reads hours for them. The first day whose hours may have been pruned is not built (its hours are
incomplete): the days tier starts at the first whole day the hours still hold.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

DAY = 86400
COUNT = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _key_columns() -> list[sa.Column]:
    return [sa.Column("bucket_start", sa.BigInteger, nullable=False),
            sa.Column("series_id", sa.Integer, nullable=False)]


def upgrade() -> None:
    op.create_table(
        "days", *_key_columns(),
        *(sa.Column(c, COUNT, nullable=False) for c in ("steps", "drafted", "accepted", "emitted", "expected_n")),
        *(sa.Column(c, sa.Float, nullable=False) for c in ("expected_sum", "draft_seconds", "verify_seconds")),
        sa.PrimaryKeyConstraint("bucket_start", "series_id", name="pk_days"),
        sa.ForeignKeyConstraint(["series_id"], ["series.id"], name="fk_days_series_id_series"),
        sqlite_with_rowid=False,
    )
    op.create_index("ix_days_series_id_bucket_start", "days", ["series_id", "bucket_start"])
    op.create_table(
        "day_positions", *_key_columns(),
        sa.Column("position", sa.SmallInteger, nullable=False),
        sa.Column("reached", COUNT, nullable=False),
        sa.Column("accepted", COUNT, nullable=False),
        sa.PrimaryKeyConstraint("bucket_start", "series_id", "position", name="pk_day_positions"),
        sa.ForeignKeyConstraint(["series_id"], ["series.id"], name="fk_day_positions_series_id_series"),
        sqlite_with_rowid=False,
    )
    conn = op.get_bind()
    hours_from = conn.execute(sa.text("SELECT available_from FROM tier_state WHERE tier = 'hour'")).scalar()
    first_day = 0 if hours_from is None else -(-int(hours_from) // DAY) * DAY
    conn.execute(sa.text("INSERT INTO tier_state (tier, available_from, rolled_until) VALUES ('day', :a, 0)"),
                 {"a": first_day})
    conn.execute(sa.text(
        "INSERT INTO dirty (tier, bucket_start, changes) "
        "SELECT DISTINCT 'day', (bucket_start / :day) * :day, 1 FROM hours WHERE bucket_start >= :first"),
        {"day": DAY, "first": first_day})


def downgrade() -> None:
    op.execute("DELETE FROM dirty WHERE tier = 'day'")
    op.execute("DELETE FROM tier_state WHERE tier = 'day'")
    op.drop_table("day_positions")
    op.drop_index("ix_days_series_id_bucket_start", table_name="days")
    op.drop_table("days")
