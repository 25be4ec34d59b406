"""undated seen: the undated entries of a source's last document, so a pruned one is not new again

Revision ID: 2026_11_23_undated_seen
Revises: 2026_11_23_identity_purge
Create Date: 2026-11-23 18:40:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = '2026_11_23_undated_seen'
down_revision: str | None = '2026_11_23_identity_purge'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('feed_sources', schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                'undated_seen',
                sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'),
                server_default=sa.text("'[]'"),
                nullable=False,
            )
        )


def downgrade() -> None:
    with op.batch_alter_table('feed_sources', schema=None) as batch_op:
        batch_op.drop_column('undated_seen')
