"""The models and the migrations describe one schema: autogenerate, run against the migrated test
database, finds nothing to do (what `alembic check` reports), on SQLite and on PostgreSQL alike."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection

from app.models import Base


def test_autogenerate_finds_no_difference(connection: Connection) -> None:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    assert compare_metadata(context, Base.metadata) == []
