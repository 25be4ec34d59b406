"""cli logins: an OAuth token row may have no client (openmagpie's command line, signed in by a device
session, holds an access and refresh token pair issued to no registered client)

Revision ID: 2026_11_26_cli_logins
Revises: 2026_11_25_campaign_source_key
Create Date: 2026-11-26 18:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '2026_11_26_cli_logins'
down_revision: str | None = '2026_11_25_campaign_source_key'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('oauth_tokens', schema=None) as batch_op:
        batch_op.alter_column('client_id', existing_type=sa.Integer(), nullable=True)


def downgrade() -> None:
    # The command line's logins have no client to keep them by: they end.
    op.execute("DELETE FROM oauth_tokens WHERE client_id IS NULL")
    with op.batch_alter_table('oauth_tokens', schema=None) as batch_op:
        batch_op.alter_column('client_id', existing_type=sa.Integer(), nullable=False)
