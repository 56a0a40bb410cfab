"""A weeks tier above days: ``weeks``, rolled up from days like the other tiers (7 days from the epoch, so a
week starts on Thursday 00:00 UTC). ``stats --since 30d`` read 30 day rows of every series; it now reads four
or five weeks and the days at the range's edges.

Upgrading builds the weeks the days already hold whole (from the first whole week after the days'
``available_from`` to the last week ended before their rollup watermark) in one ``INSERT ... SELECT``, and
marks the weeks after it (the current one) for the rollup, which builds each once it has ended. Downgrading
drops the table.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

WEEK = 7 * 86400
COUNT = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
POSITIONS = 32
VALUES = ("steps", "drafted", "accepted", "emitted", "expected_n", "expected_sum", "draft_seconds", "verify_seconds",
          *(f"at_least_{i}" for i in range(POSITIONS + 1)))


def upgrade() -> None:
    op.create_table(
        "weeks", sa.Column("bucket_start", sa.BigInteger, nullable=False),
        sa.Column("series_id", sa.Integer, nullable=False),
        *(sa.Column(c, COUNT, nullable=False) for c in ("steps", "drafted", "accepted", "emitted", "expected_n")),
        *(sa.Column(c, sa.Float, nullable=False) for c in ("expected_sum", "draft_seconds", "verify_seconds")),
        *(sa.Column(f"at_least_{i}", COUNT) for i in range(POSITIONS + 1)),
        sa.PrimaryKeyConstraint("bucket_start", "series_id", name="pk_weeks"),
        sa.ForeignKeyConstraint(["series_id"], ["series.id"], name="fk_weeks_series_id_series"),
        sqlite_with_rowid=False)
    op.create_index("ix_weeks_series_id_bucket_start", "weeks", ["series_id", "bucket_start"])
    conn = op.get_bind()
    days = conn.execute(sa.text("SELECT available_from, rolled_until FROM tier_state WHERE tier = 'day'")).first()
    available, rolled = (0, 0) if days is None else (int(days[0]), int(days[1]))
    first, end = -(-available // WEEK) * WEEK, rolled // WEEK * WEEK
    end = max(first, end)
    if first < end:  # sums of NULL are NULL: positions above a series' K stay NULL
        conn.execute(sa.text(
            f"INSERT INTO weeks (bucket_start, series_id, {', '.join(VALUES)}) "
            f"SELECT (bucket_start / {WEEK}) * {WEEK}, series_id, {', '.join(f'sum({c})' for c in VALUES)} "
            "FROM days WHERE bucket_start >= :first AND bucket_start < :end "
            f"GROUP BY (bucket_start / {WEEK}) * {WEEK}, series_id"), {"first": first, "end": end})
    conn.execute(sa.text("INSERT INTO tier_state (tier, available_from, rolled_until, packed_until) "
                         "VALUES ('week', :a, :r, 0)"), {"a": first, "r": end})
    conn.execute(sa.text(
        "INSERT INTO dirty (tier, bucket_start, shard, changes) "
        f"SELECT DISTINCT 'week', (bucket_start / {WEEK}) * {WEEK}, 0, 1 FROM days WHERE bucket_start >= :end"),
        {"end": end})


def downgrade() -> None:
    op.execute("DELETE FROM dirty WHERE tier = 'week'")
    op.execute("DELETE FROM tier_state WHERE tier = 'week'")
    op.drop_index("ix_weeks_series_id_bucket_start", table_name="weeks")
    op.drop_table("weeks")
