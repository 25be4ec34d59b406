"""campaigns.source_key: the watch runs a campaign was made from, so a retried run finds its campaign

A watch's `email` action makes a campaign from its runs; the key is the same for every attempt at the
same runs, and unique, so a worker that died between making the campaign and recording its runs does
not make a second one (the lists are never emailed twice for the same items).

Revision ID: 2026_11_25_campaign_source_key
Revises: 2026_11_25_dkim_keys
Create Date: 2026-11-25 18:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '2026_11_25_campaign_source_key'
down_revision: str | None = '2026_11_25_dkim_keys'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('campaigns') as batch:
        batch.add_column(sa.Column('source_key', sa.String(length=64), nullable=True))
    op.create_index('uq_campaigns_source_key', 'campaigns', ['source_key'], unique=True)


def downgrade() -> None:
    op.drop_index('uq_campaigns_source_key', table_name='campaigns')
    with op.batch_alter_table('campaigns') as batch:
        batch.drop_column('source_key')
