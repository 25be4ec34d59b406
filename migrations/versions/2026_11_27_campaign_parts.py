"""campaign parts: a campaign's own text part, preheader, Reply-To, open-pixel switch and public archive
opt-in, the account's open-pixel and public archive switches, and every click of a tracked link with its URL (the report's clicks per link)

Revision ID: 2026_11_27_campaign_parts
Revises: 2026_11_26_provider_replay
Create Date: 2026-11-27 21:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.models.base

revision: str = '2026_11_27_campaign_parts'
down_revision: str | None = '2026_11_26_provider_replay'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('campaigns') as batch:
        batch.add_column(sa.Column('text', sa.Text(), nullable=True))
        batch.add_column(sa.Column('preheader', sa.String(length=255), nullable=True))
        batch.add_column(sa.Column('reply_to', sa.String(length=191), nullable=True))
        batch.add_column(sa.Column('track_opens', sa.Boolean(), server_default=sa.true(), nullable=False))
        batch.add_column(sa.Column('public_archive', sa.Boolean(), server_default=sa.false(), nullable=False))
    with op.batch_alter_table('accounts') as batch:
        batch.add_column(sa.Column('track_opens', sa.Boolean(), server_default=sa.true(), nullable=False))
        batch.add_column(sa.Column('public_archive', sa.Boolean(), server_default=sa.false(), nullable=False))
    op.create_table(
        'link_clicks',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('campaign_id', sa.Integer(), nullable=False),
        sa.Column('deliverable_id', sa.Integer(), nullable=False),
        sa.Column('url', sa.Text(), nullable=False),
        sa.Column('clicked_at', app.models.base.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ['campaign_id'], ['campaigns.id'], name=op.f('fk_link_clicks_campaign_id_campaigns'), ondelete='CASCADE'
        ),
        sa.ForeignKeyConstraint(
            ['deliverable_id'],
            ['deliverables.id'],
            name=op.f('fk_link_clicks_deliverable_id_deliverables'),
            ondelete='CASCADE',
        ),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_link_clicks')),
    )
    op.create_index('ix_link_clicks_campaign_id', 'link_clicks', ['campaign_id'], unique=False)
    op.create_index(op.f('ix_link_clicks_deliverable_id'), 'link_clicks', ['deliverable_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_link_clicks_deliverable_id'), table_name='link_clicks')
    op.drop_index('ix_link_clicks_campaign_id', table_name='link_clicks')
    op.drop_table('link_clicks')
    with op.batch_alter_table('accounts') as batch:
        batch.drop_column('public_archive')
        batch.drop_column('track_opens')
    with op.batch_alter_table('campaigns') as batch:
        batch.drop_column('public_archive')
        batch.drop_column('track_opens')
        batch.drop_column('reply_to')
        batch.drop_column('preheader')
        batch.drop_column('text')
