"""Per-position counts move into the tier rows: ``at_least_0..32`` replace the ``<tier>_positions`` tables.

A row per drafted position reached was about 60% of the bytes of a fleet's history (a 10-second window of
a K = 4 series: one row and four more). A tier row now carries ``at_least_i``: the per-step records of the
bucket that accepted at least i drafted tokens, for i = 0..K of its series, NULL above (PostgreSQL keeps a
NULL as one bit). Position i was reached ``at_least_{i-1}`` times and accepted ``at_least_i`` times, which
is what the per-position rows held. Positions above 32 (a store configured with kmax over 32) are not
carried over: the store now takes K up to 32.

Every tier row is rewritten once. On PostgreSQL that is one join per tier with its positions pivoted:
400 000 window rows with 800 000 position rows took 4.1 s on a 2-core machine, against 12.7 s with a
lookup per row and column (what SQLite does, where UPDATE ... FROM needs 3.33).

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
        # at_least_0 is position 1's reached, at_least_i position i's accepted. A position with no row was
        # not reached: 0 up to the series' K, NULL above it.
        if conn.dialect.name == "postgresql":
            _fill_joined(conn, table, positions)
        else:
            _fill_correlated(conn, table, positions)
        op.drop_table(positions)


def _new_value(i: int, k: str, value: str) -> str:
    return f"CASE WHEN {k} >= {max(i, 1)} THEN COALESCE({value}, 0) END"


def _fill_joined(conn, table: str, positions: str) -> None:
    """One pass (PostgreSQL): every row's new values from a join with its positions pivoted, since a fleet's
    tables hold millions of rows and a lookup per row and column would take hours."""
    pivot = ", ".join(["max(CASE WHEN position = 1 THEN reached END) AS p0"]
                      + [f"max(CASE WHEN position = {i} THEN accepted END) AS p{i}" for i in range(1, POSITIONS + 1)])
    values = ", ".join(_new_value(i, "s.lookahead", f"p.p{i}") + f" AS v{i}" for i in range(POSITIONS + 1))
    conn.execute(sa.text(
        f"UPDATE {table} t SET ({', '.join(AT_LEAST)}) = ({', '.join(f'v.v{i}' for i in range(POSITIONS + 1))}) "
        f"FROM (SELECT w.bucket_start, w.series_id, {values} FROM {table} w JOIN series s ON s.id = w.series_id "
        f"LEFT JOIN (SELECT bucket_start, series_id, {pivot} FROM {positions} GROUP BY bucket_start, series_id) p "
        f"ON p.bucket_start = w.bucket_start AND p.series_id = w.series_id) v "
        f"WHERE v.bucket_start = t.bucket_start AND v.series_id = t.series_id"))


def _fill_correlated(conn, table: str, positions: str) -> None:
    """SQLite (one process's history; UPDATE ... FROM needs SQLite 3.33): a primary-key lookup per value."""
    def position(i: int, column: str) -> str:
        return (f"(SELECT p.{column} FROM {positions} p WHERE p.bucket_start = {table}.bucket_start "
                f"AND p.series_id = {table}.series_id AND p.position = {i})")

    k = f"(SELECT s.lookahead FROM series s WHERE s.id = {table}.series_id)"
    sets = [f"at_least_0 = {_new_value(0, k, position(1, 'reached'))}"]
    sets += [f"at_least_{i} = {_new_value(i, k, position(i, 'accepted'))}" for i in range(1, POSITIONS + 1)]
    conn.execute(sa.text(f"UPDATE {table} SET {', '.join(sets)}"))


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
