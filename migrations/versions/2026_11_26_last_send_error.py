"""last_send_error: a campaign keeps the last error its emails met and when

Revision ID: 2026_11_26_last_send_error
Revises: 2026_11_25_campaign_source_key
Create Date: 2026-11-26 18:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.models.base

revision: str = '2026_11_26_last_send_error'
down_revision: str | None = '2026_11_26_deliverability'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('campaigns') as batch:
        batch.add_column(sa.Column('last_delivery_error', sa.Text(), nullable=True))
        batch.add_column(sa.Column('last_delivery_error_at', app.models.base.UTCDateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('campaigns') as batch:
        batch.drop_column('last_delivery_error_at')
        batch.drop_column('last_delivery_error')
