"""Counts of the three tiers and their per-position tables as 8-byte integers on PostgreSQL.

An aggregate record folds up to MAX_STEPS verification passes, so one hour row of one series can pass 2^31
drafted tokens; a 4-byte column refused it. SQLite's INTEGER is 8 bytes already: nothing changes there.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TIERS = (("windows", "window"), ("minutes", "minute"), ("hours", "hour"))
COUNTS = ("steps", "drafted", "accepted", "emitted", "expected_n")
POSITION_COUNTS = ("reached", "accepted")


def _columns():
    for table, single in TIERS:
        yield from ((table, c) for c in COUNTS)
        yield from ((f"{single}_positions", c) for c in POSITION_COUNTS)


def _retype(to: sa.types.TypeEngine, was: sa.types.TypeEngine) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, column in _columns():
        op.alter_column(table, column, type_=to, existing_type=was, existing_nullable=False)


def upgrade() -> None:
    _retype(sa.BigInteger(), sa.Integer())


def downgrade() -> None:
    _retype(sa.Integer(), sa.BigInteger())
