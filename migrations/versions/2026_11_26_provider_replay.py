"""provider replay: the single-use tokens of signed provider webhooks (Mailgun), remembered while fresh;
and an account webhook's previous secret, which keeps signing for a grace period after a rotation

Revision ID: 2026_11_26_provider_replay
Revises: 2026_11_25_campaign_source_key
Create Date: 2026-11-26 17:40:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.models.base

revision: str = '2026_11_26_provider_replay'
down_revision: str | None = '2026_11_26_campaign_controls'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'provider_tokens',
        sa.Column('provider', sa.String(length=16), nullable=False),
        sa.Column('token_sha256', sa.String(length=64), nullable=False),
        sa.Column('body_sha256', sa.String(length=64), nullable=False),
        sa.Column('signed_at', app.models.base.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint('provider', 'token_sha256', name=op.f('pk_provider_tokens')),
    )
    op.create_index('ix_provider_tokens_signed_at', 'provider_tokens', ['signed_at'], unique=False)
    with op.batch_alter_table('account_webhooks') as batch:
        batch.add_column(sa.Column('previous_secret', sa.String(length=100), nullable=True))
        batch.add_column(sa.Column('previous_secret_until', app.models.base.UTCDateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('account_webhooks') as batch:
        batch.drop_column('previous_secret_until')
        batch.drop_column('previous_secret')
    op.drop_index('ix_provider_tokens_signed_at', table_name='provider_tokens')
    op.drop_table('provider_tokens')
