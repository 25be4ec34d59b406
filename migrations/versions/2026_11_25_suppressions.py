"""suppressions: one suppression list per account, filled from the hard bounces and complaints so far

Every contact with a hard bounce (contacts.bounced_at) or a complaint (a deliverable's spam_at) goes
on its account's list, deleted contacts too: the list is what keeps a re-imported address from being
sent to again.

Revision ID: 2026_11_25_suppressions
Revises: 2026_11_25_account_webhooks
Create Date: 2026-11-25 14:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.models.base

revision: str = '2026_11_25_suppressions'
down_revision: str | None = '2026_11_25_account_webhooks'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# A complaint first, so an address that both bounced and complained is listed as a complaint.
BACKFILL_COMPLAINTS = """
INSERT INTO suppressions (account_id, email, email_key, reason, created_at)
SELECT c.account_id, c.email, c.email_key, 'complaint', MIN(d.spam_at)
FROM contacts c JOIN deliverables d ON d.contact_id = c.id
WHERE d.spam_at IS NOT NULL
GROUP BY c.account_id, c.email, c.email_key
"""
BACKFILL_BOUNCES = """
INSERT INTO suppressions (account_id, email, email_key, reason, created_at)
SELECT c.account_id, c.email, c.email_key, 'bounce', c.bounced_at
FROM contacts c
WHERE c.bounced_at IS NOT NULL
  AND NOT EXISTS (
    SELECT 1 FROM suppressions s WHERE s.account_id = c.account_id AND s.email_key = c.email_key
  )
"""


def upgrade() -> None:
    op.create_table(
        'suppressions',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('account_id', sa.Integer(), nullable=False),
        sa.Column('email', sa.String(length=191), nullable=False),
        sa.Column('email_key', sa.String(length=191), nullable=False),
        sa.Column('reason', sa.String(length=16), nullable=False),
        sa.Column('created_at', app.models.base.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ['account_id'], ['accounts.id'], name=op.f('fk_suppressions_account_id_accounts'), ondelete='CASCADE'
        ),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_suppressions')),
        sa.UniqueConstraint('account_id', 'email_key', name=op.f('uq_suppressions_account_id_email_key')),
    )
    op.execute(BACKFILL_COMPLAINTS)
    op.execute(BACKFILL_BOUNCES)


def downgrade() -> None:
    op.drop_table('suppressions')
