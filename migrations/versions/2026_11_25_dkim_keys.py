"""dkim keys: the operator's DKIM signing keys per sending domain (`tidings dkim create`)

Revision ID: 2026_11_25_dkim_keys
Revises: 2026_11_25_suppressions
Create Date: 2026-11-25 14:40:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '2026_11_25_dkim_keys'
down_revision: str | None = '2026_11_25_suppressions'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'dkim_keys',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('domain', sa.String(length=253), nullable=False),
        sa.Column('selector', sa.String(length=63), nullable=False),
        sa.Column('algorithm', sa.String(length=16), nullable=False),
        sa.Column('private_key', sa.Text(), nullable=False),
        sa.Column('public_key', sa.Text(), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_dkim_keys')),
        sa.UniqueConstraint('domain', 'selector', name=op.f('uq_dkim_keys_domain_selector')),
    )


def downgrade() -> None:
    op.drop_table('dkim_keys')
