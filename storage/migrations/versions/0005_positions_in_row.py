"""Per-position counts move into the tier rows: ``at_least_0..32`` replace the ``<tier>_positions`` tables.

A row per drafted position reached was about 60% of the bytes of a fleet's history (a 10-second window of
a K = 4 series: one row and four more). A tier row now carries ``at_least_i``: the per-step records of the
bucket that accepted at least i drafted tokens, for i = 0..K of its series, NULL above (PostgreSQL keeps a
NULL as one bit). Position i was reached ``at_least_{i-1}`` times and accepted ``at_least_i`` times, which
is what the per-position rows held. Positions above 32 (a store configured with kmax over 32) are not
carried over: the store now takes K up to 32.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

POSITIONS = 32
AT_LEAST = [f"at_least_{i}" for i in range(POSITIONS + 1)]
TIERS = (("windows", "window_positions"), ("minutes", "minute_positions"), ("hours", "hour_positions"),
         ("days", "day_positions"))
COUNT = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    conn = op.get_bind()
    for table, positions in TIERS:
        for name in AT_LEAST:
            op.add_column(table, sa.Column(name, COUNT, nullable=True))

        def position(i: int, column: str) -> str:
            return (f"(SELECT p.{column} FROM {positions} p WHERE p.bucket_start = {table}.bucket_start "
                    f"AND p.series_id = {table}.series_id AND p.position = {i})")

        k = f"(SELECT s.lookahead FROM series s WHERE s.id = {table}.series_id)"
        # at_least_0 is position 1's reached; at_least_i position i's accepted. A position with no row was
        # not reached: 0 up to the series' K, NULL above it.
        sets = [f"at_least_0 = CASE WHEN {k} > 0 THEN COALESCE({position(1, 'reached')}, 0) END"]
        sets += [f"at_least_{i} = CASE WHEN {k} >= {i} THEN COALESCE({position(i, 'accepted')}, 0) END"
                 for i in range(1, POSITIONS + 1)]
        conn.execute(sa.text(f"UPDATE {table} SET {', '.join(sets)}"))
        op.drop_table(positions)


def downgrade() -> None:
    conn = op.get_bind()
    for table, positions in TIERS:
        op.create_table(
            positions,
            sa.Column("bucket_start", sa.BigInteger, nullable=False),
            sa.Column("series_id", sa.Integer, nullable=False),
            sa.Column("position", sa.SmallInteger, nullable=False),
            sa.Column("reached", COUNT, nullable=False),
            sa.Column("accepted", COUNT, nullable=False),
            sa.PrimaryKeyConstraint("bucket_start", "series_id", "position", name=f"pk_{positions}"),
            sa.ForeignKeyConstraint(["series_id"], ["series.id"], name=f"fk_{positions}_series_id_series"),
            sqlite_with_rowid=False,
        )
        for i in range(1, POSITIONS + 1):
            conn.execute(sa.text(
                f"INSERT INTO {positions} (bucket_start, series_id, position, reached, accepted) "
                f"SELECT bucket_start, series_id, {i}, at_least_{i - 1}, at_least_{i} FROM {table} "
                f"WHERE at_least_{i - 1} > 0 AND at_least_{i} IS NOT NULL"))
        with op.batch_alter_table(table) as batch:
            for name in AT_LEAST:
                batch.drop_column(name)
