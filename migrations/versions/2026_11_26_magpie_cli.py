"""magpie cli: an OAuth token row may have no client (openmagpie's command line, signed in by a device
session, holds an access and refresh token pair issued to no registered client); action_backfills, the
record of each `magpie backfill`

Revision ID: 2026_11_26_magpie_cli
Revises: 2026_11_25_campaign_source_key
Create Date: 2026-11-26 18:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.models.base

revision: str = '2026_11_26_magpie_cli'
down_revision: str | None = '2026_11_25_campaign_source_key'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('oauth_tokens', schema=None) as batch_op:
        batch_op.alter_column('client_id', existing_type=sa.Integer(), nullable=True)
    op.create_table('action_backfills',
    sa.Column('id', sa.String(length=26), nullable=False),
    sa.Column('account_id', sa.Integer(), nullable=False),
    sa.Column('target_action_id', sa.String(length=26), nullable=False),
    sa.Column('source_action_id', sa.String(length=26), nullable=False),
    sa.Column('kind', sa.String(length=32), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('replace', sa.Boolean(), nullable=False),
    sa.Column('occurred_since', app.models.base.UTCDateTime(), nullable=True),
    sa.Column('occurred_until', app.models.base.UTCDateTime(), nullable=True),
    sa.Column('completed_since', app.models.base.UTCDateTime(), nullable=True),
    sa.Column('completed_until', app.models.base.UTCDateTime(), nullable=True),
    sa.Column('matched', sa.Integer(), nullable=False),
    sa.Column('present', sa.Integer(), nullable=False),
    sa.Column('pruned', sa.Integer(), nullable=False),
    sa.Column('deleted', sa.Integer(), nullable=False),
    sa.Column('enqueued', sa.Integer(), nullable=False),
    sa.Column('error', sa.Text(), nullable=False),
    sa.Column('created_at', app.models.base.UTCDateTime(), nullable=False),
    sa.Column('started_at', app.models.base.UTCDateTime(), nullable=True),
    sa.Column('completed_at', app.models.base.UTCDateTime(), nullable=True),
    sa.ForeignKeyConstraint(['account_id'], ['accounts.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_action_backfills_account_id_id', 'action_backfills', ['account_id', 'id'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_action_backfills_account_id_id', table_name='action_backfills')
    op.drop_table('action_backfills')
    # The command line's logins have no client to keep them by: they end.
    op.execute("DELETE FROM oauth_tokens WHERE client_id IS NULL")
    with op.batch_alter_table('oauth_tokens', schema=None) as batch_op:
        batch_op.alter_column('client_id', existing_type=sa.Integer(), nullable=False)
