"""contact search: a trigram index (pg_trgm) on each contact's address and names, so a search by part of
one finds its candidates without reading every contact of the account (PostgreSQL only)

Revision ID: 2026_11_27_contact_search
Revises: 2026_11_27_campaign_parts
Create Date: 2026-11-27 01:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = '2026_11_27_contact_search'
down_revision: str | None = '2026_11_27_campaign_parts'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# app.models.contacts.contact_search_text, as it was written.
SEARCH_TEXT = "email_key || ' ' || coalesce(lower(first_name), '') || ' ' || coalesce(lower(last_name), '')"


def upgrade() -> None:
    if op.get_bind().dialect.name != 'postgresql':
        return
    # pg_trgm ships with PostgreSQL (Debian's postgresql-contrib) and is a trusted extension: the
    # database's owner may create it.
    op.execute('CREATE EXTENSION IF NOT EXISTS pg_trgm')
    op.execute(f'CREATE INDEX ix_contacts_search ON contacts USING gin (({SEARCH_TEXT}) gin_trgm_ops)')


def downgrade() -> None:
    if op.get_bind().dialect.name != 'postgresql':
        return
    op.execute('DROP INDEX ix_contacts_search')
