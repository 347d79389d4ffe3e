"""memory idle writes

Revision ID: 5d1e0c7a9b42
Revises: de3538a90e5c
Create Date: 2026-12-02 08:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = "5d1e0c7a9b42"
down_revision: str | None = "de3538a90e5c"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("idle_written_turn", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.drop_column("idle_written_turn")
