"""queue gauges: partial indexes for pending webhook deliveries and failing feed sources

GET /metrics counts both at every scrape; without these, each count reads the whole table (the
deliveries table keeps every attempt). The sweep of deliveries left pending uses the first one too.

Revision ID: 2026_11_23_queue_gauges
Revises: 2026_11_22_watches
Create Date: 2026-11-23 18:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '2026_11_23_queue_gauges'
down_revision: str | None = '2026_11_22_watches'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PENDING = sa.text("state = 'pending'")
FAILING = sa.text("consecutive_failures > 0")


def upgrade() -> None:
    with op.batch_alter_table('watch_action_deliveries', schema=None) as batch_op:
        batch_op.create_index(
            'ix_watch_action_deliveries_pending',
            ['started_at'],
            unique=False,
            postgresql_where=PENDING,
            sqlite_where=PENDING,
        )
    with op.batch_alter_table('feed_sources', schema=None) as batch_op:
        batch_op.create_index(
            'ix_feed_sources_failing',
            ['retry_at'],
            unique=False,
            postgresql_where=FAILING,
            sqlite_where=FAILING,
        )


def downgrade() -> None:
    with op.batch_alter_table('feed_sources', schema=None) as batch_op:
        batch_op.drop_index('ix_feed_sources_failing', postgresql_where=FAILING, sqlite_where=FAILING)
    with op.batch_alter_table('watch_action_deliveries', schema=None) as batch_op:
        batch_op.drop_index(
            'ix_watch_action_deliveries_pending', postgresql_where=PENDING, sqlite_where=PENDING
        )
