"""telegram update claims per bot, group messages kept as context

Revision ID: 5b1f0c7d2e8a
Revises: c92e68093bd0
Create Date: 2026-12-01 14:55:00

Update ids are numbered per bot, so a claim is keyed by (bot_id, update_id). The claims
of the old table are dropped: they are kept for days only to catch redeliveries, and after
an upgrade the bot starts from the update offset Telegram last confirmed.

telegram_chat_messages keeps the group messages not addressed to the bot (group_context
`all`) until the next answered turn takes them in.
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
    op.create_table(
        "telegram_chat_messages",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("conversation_key", sa.String(length=255), nullable=False),
        sa.Column("author", sa.String(length=255), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_telegram_chat_messages_conversation_key",
        "telegram_chat_messages",
        ["conversation_key"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_telegram_chat_messages_conversation_key", table_name="telegram_chat_messages")
    op.drop_table("telegram_chat_messages")
    _drop()
    _create("update_id")
