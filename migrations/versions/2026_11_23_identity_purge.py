"""identity purge: indexes on the expiry columns the hourly purge of identity rows reads

Without them each purge reads the whole sessions, device_sessions, oauth_tokens and
oauth_authorization_codes tables. The oauth_tokens access-expiry index is partial (rows without a
refresh token): nearly every row has one, and the purge deletes those by refresh expiry instead.

Revision ID: 2026_11_23_identity_purge
Revises: 2026_11_23_queue_gauges
Create Date: 2026-11-23 20:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '2026_11_23_identity_purge'
down_revision: str | None = '2026_11_23_queue_gauges'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NO_REFRESH_TOKEN = sa.text("refresh_token_hash IS NULL")


def upgrade() -> None:
    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.create_index('ix_sessions_expires_at', ['expires_at'], unique=False)
    with op.batch_alter_table('device_sessions', schema=None) as batch_op:
        batch_op.create_index('ix_device_sessions_expires_at', ['expires_at'], unique=False)
    with op.batch_alter_table('oauth_tokens', schema=None) as batch_op:
        batch_op.create_index(
            'ix_oauth_tokens_refresh_expires_at', ['refresh_expires_at'], unique=False
        )
        batch_op.create_index(
            'ix_oauth_tokens_access_expires_at_no_refresh',
            ['access_expires_at'],
            unique=False,
            postgresql_where=NO_REFRESH_TOKEN,
            sqlite_where=NO_REFRESH_TOKEN,
        )
    with op.batch_alter_table('oauth_authorization_codes', schema=None) as batch_op:
        batch_op.create_index(
            'ix_oauth_authorization_codes_expires_at', ['expires_at'], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table('oauth_authorization_codes', schema=None) as batch_op:
        batch_op.drop_index('ix_oauth_authorization_codes_expires_at')
    with op.batch_alter_table('oauth_tokens', schema=None) as batch_op:
        batch_op.drop_index(
            'ix_oauth_tokens_access_expires_at_no_refresh',
            postgresql_where=NO_REFRESH_TOKEN,
            sqlite_where=NO_REFRESH_TOKEN,
        )
        batch_op.drop_index('ix_oauth_tokens_refresh_expires_at')
    with op.batch_alter_table('device_sessions', schema=None) as batch_op:
        batch_op.drop_index('ix_device_sessions_expires_at')
    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.drop_index('ix_sessions_expires_at')
