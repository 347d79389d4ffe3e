"""telegram update claims per bot

Revision ID: 5b1f0c7d2e8a
Revises: c92e68093bd0
Create Date: 2026-12-01 14:55:00

Update ids are numbered per bot, so a claim is keyed by (bot_id, update_id). The claims
of the old table are dropped: they are kept for days only to catch redeliveries, and after
an upgrade the bot starts from the update offset Telegram last confirmed.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = "5b1f0c7d2e8a"
down_revision: str | None = "c92e68093bd0"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "telegram_processed_updates"
INDEX = "ix_telegram_processed_updates_processed_at"


def _create(*key: str) -> None:
    op.create_table(
        TABLE,
        *(sa.Column(name, sa.BigInteger(), autoincrement=False, nullable=False) for name in key),
        sa.Column("processed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint(*key),
    )
    op.create_index(INDEX, TABLE, ["processed_at"], unique=False)


def _drop() -> None:
    op.drop_index(INDEX, table_name=TABLE)
    op.drop_table(TABLE)


def upgrade() -> None:
    _drop()
    _create("bot_id", "update_id")


def downgrade() -> None:
    _drop()
    _create("update_id")
