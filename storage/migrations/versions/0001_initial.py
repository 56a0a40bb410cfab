"""Initial schema: series, three tiers with per-position counts, rollup state and events.

A migration is a frozen copy of the schema at its revision: it does not import storage.schema, so later
schema changes never rewrite history.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TEXT = 128
TIERS = (("windows", "window", False), ("minutes", "minute", True), ("hours", "hour", True))


def _key_columns() -> list[sa.Column]:
    return [sa.Column("bucket_start", sa.BigInteger, nullable=False),
            sa.Column("series_id", sa.Integer, nullable=False)]


def upgrade() -> None:
    op.create_table(
        "series",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("domain", sa.String(256), nullable=False),
        sa.Column("lookahead", sa.Integer, nullable=False),
        sa.Column("target_version", sa.String(TEXT), nullable=False),
        sa.Column("draft_version", sa.String(TEXT), nullable=False),
        sa.Column("pod", sa.String(TEXT), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_series"),
        sa.UniqueConstraint("domain", "lookahead", "target_version", "draft_version", "pod",
                            name="uq_series_domain_lookahead_target_version_draft_version_pod"),
    )
    for table, single, by_series in TIERS:
        op.create_table(
            table, *_key_columns(),
            *(sa.Column(c, sa.Integer, nullable=False)
              for c in ("steps", "drafted", "accepted", "emitted", "expected_n")),
            *(sa.Column(c, sa.Float, nullable=False)
              for c in ("expected_sum", "draft_seconds", "verify_seconds")),
            sa.PrimaryKeyConstraint("bucket_start", "series_id", name=f"pk_{table}"),
            sa.ForeignKeyConstraint(["series_id"], ["series.id"], name=f"fk_{table}_series_id_series"),
            sqlite_with_rowid=False,
        )
        if by_series:
            op.create_index(f"ix_{table}_series_id_bucket_start", table, ["series_id", "bucket_start"])
        op.create_table(
            f"{single}_positions", *_key_columns(),
            sa.Column("position", sa.SmallInteger, nullable=False),
            sa.Column("reached", sa.Integer, nullable=False),
            sa.Column("accepted", sa.Integer, nullable=False),
            sa.PrimaryKeyConstraint("bucket_start", "series_id", "position", name=f"pk_{single}_positions"),
            sa.ForeignKeyConstraint(["series_id"], ["series.id"],
                                    name=f"fk_{single}_positions_series_id_series"),
            sqlite_with_rowid=False,
        )
    op.create_table(
        "dirty",
        sa.Column("tier", sa.String(16), nullable=False),
        sa.Column("bucket_start", sa.BigInteger, nullable=False),
        sa.Column("changes", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("tier", "bucket_start", name="pk_dirty"),
    )
    op.create_table(
        "tier_state",
        sa.Column("tier", sa.String(16), nullable=False),
        sa.Column("available_from", sa.BigInteger, nullable=False),
        sa.Column("rolled_until", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("tier", name="pk_tier_state"),
    )
    op.create_table(
        "model_versions",
        sa.Column("pod", sa.String(TEXT), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("version", sa.String(TEXT), nullable=False),
        sa.Column("first_seen", sa.Float, nullable=False),
        sa.Column("last_seen", sa.Float, nullable=False),
        sa.PrimaryKeyConstraint("pod", "role", "version", name="pk_model_versions"),
    )
    _events()


def _events() -> None:
    common = lambda: [sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),  # noqa: E731
                      sa.Column("ts", sa.Float, nullable=False),
                      sa.Column("pod", sa.String(TEXT), nullable=False),
                      sa.Column("domain", sa.String(256), nullable=False)]
    op.create_table("transitions", *common(),
                    sa.Column("enabled", sa.Boolean, nullable=False),
                    sa.Column("reason", sa.Text, nullable=False),
                    sa.PrimaryKeyConstraint("id", name="pk_transitions"))
    op.create_index("ix_transitions_domain_ts", "transitions", ["domain", "ts"])
    op.create_table("decisions", *common(),
                    sa.Column("lookahead", sa.Integer, nullable=False),
                    sa.Column("speculate", sa.Boolean, nullable=False),
                    sa.Column("policy", sa.String(TEXT), nullable=False),
                    sa.Column("reason", sa.Text, nullable=False),
                    sa.PrimaryKeyConstraint("id", name="pk_decisions"))
    op.create_index("ix_decisions_pod_domain_ts", "decisions", ["pod", "domain", "ts"])
    op.create_table(
        "alerts",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("alertname", sa.String(256), nullable=False),
        sa.Column("labels", sa.Text, nullable=False),
        sa.Column("annotations", sa.Text, nullable=False),
        sa.Column("starts_at", sa.Float, nullable=False),
        sa.Column("ends_at", sa.Float),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_alerts"),
        sa.UniqueConstraint("fingerprint", "starts_at", name="uq_alerts_fingerprint_starts_at"),
    )
    op.create_index("ix_alerts_ends_at", "alerts", ["ends_at"])


def downgrade() -> None:
    for table in ("alerts", "decisions", "transitions", "model_versions", "tier_state", "dirty"):
        op.drop_table(table)
    for table, single, _ in reversed(TIERS):
        op.drop_table(f"{single}_positions")
        op.drop_table(table)
    op.drop_table("series")
