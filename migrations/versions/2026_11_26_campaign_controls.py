"""campaign controls: a campaign can be paused, resumed and cancelled

`held_at` is set while no email of the campaign may start (paused, or cancelled); the send claim skips
the campaigns it marks, found through a partial index (few rows at any time: mostly none). `cancelled_at`
is set once, for good.

Revision ID: 2026_11_26_campaign_controls
Revises: 2026_11_25_campaign_source_key
Create Date: 2026-11-26 17:45:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.models.base

revision: str = '2026_11_26_campaign_controls'
down_revision: str | None = '2026_11_26_last_send_error'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('campaigns') as batch:
        batch.add_column(sa.Column('held_at', app.models.base.UTCDateTime(), nullable=True))
        batch.add_column(sa.Column('cancelled_at', app.models.base.UTCDateTime(), nullable=True))
    op.create_index(
        'ix_campaigns_held',
        'campaigns',
        ['id'],
        unique=False,
        postgresql_where=sa.text('held_at IS NOT NULL'),
        sqlite_where=sa.text('held_at IS NOT NULL'),
    )


def downgrade() -> None:
    op.drop_index('ix_campaigns_held', table_name='campaigns')
    with op.batch_alter_table('campaigns') as batch:
        batch.drop_column('cancelled_at')
        batch.drop_column('held_at')
