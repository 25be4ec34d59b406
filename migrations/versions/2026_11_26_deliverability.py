"""deliverability: blocked rejections (refusals of the sender, not the address), counted per receiving
domain; a campaign's send warning (sent unsigned)

Revision ID: 2026_11_26_deliverability
Revises: 2026_11_25_campaign_source_key
Create Date: 2026-11-26 17:45:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.models.base

revision: str = '2026_11_26_deliverability'
down_revision: str | None = '2026_11_26_magpie_cli'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'blocked_rejections',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('account_id', sa.Integer(), nullable=False),
        sa.Column('campaign_id', sa.Integer(), nullable=False),
        sa.Column('deliverable_id', sa.Integer(), nullable=False),
        sa.Column('receiving_domain', sa.String(length=191), nullable=False),
        sa.Column('status', sa.String(length=16), nullable=True),
        sa.Column('detail', sa.String(length=500), nullable=True),
        sa.Column('created_at', app.models.base.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ['account_id'], ['accounts.id'], name=op.f('fk_blocked_rejections_account_id_accounts'),
            ondelete='CASCADE',
        ),
        sa.ForeignKeyConstraint(
            ['campaign_id'], ['campaigns.id'], name=op.f('fk_blocked_rejections_campaign_id_campaigns'),
            ondelete='CASCADE',
        ),
        sa.ForeignKeyConstraint(
            ['deliverable_id'], ['deliverables.id'],
            name=op.f('fk_blocked_rejections_deliverable_id_deliverables'), ondelete='CASCADE',
        ),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_blocked_rejections')),
        sa.UniqueConstraint('deliverable_id', name=op.f('uq_blocked_rejections_deliverable_id')),
    )
    op.create_index(
        'ix_blocked_rejections_campaign_domain', 'blocked_rejections', ['campaign_id', 'receiving_domain']
    )
    op.add_column('campaigns', sa.Column('send_warning', sa.String(length=255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('campaigns') as batch:
        batch.drop_column('send_warning')
    op.drop_index('ix_blocked_rejections_campaign_domain', table_name='blocked_rejections')
    op.drop_table('blocked_rejections')
