"""Alembic environment: the URL comes from the caller (`app.migrate`) or TIDINGS_DATABASE_URL."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from alembic import context
from sqlalchemy import Connection, text

from app.config import Settings
from app.db import create_db_engine
from app.models import Base

# Any constant shared by every Tidings process; it only has to differ from other advisory locks' keys.
MIGRATION_LOCK_KEY = 0x7469_6469

config = context.config
target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things in place: batch mode rebuilds the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            # Several processes start at once (API replicas, workers) and each migrates to head: the
            # first takes this lock and migrates; the others wait, then find nothing left to do.
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        context.run_migrations()


@contextmanager
def _foreign_keys_off(connection: Connection) -> Iterator[None]:
    """SQLite's batch mode rebuilds a table (a copy, DROP TABLE, a rename), and with foreign keys on the
    DROP first deletes every row, cascading to the tables that reference it: rebuilding `accounts` would
    empty contacts, campaigns and suppressions. Off for the migration (set outside a transaction, on the
    driver's connection, where SQLite honours it), on again after."""
    if connection.dialect.name != "sqlite":
        yield
        return
    driver = connection.connection.driver_connection
    driver.execute("PRAGMA foreign_keys=OFF")
    try:
        yield
    finally:
        driver.execute("PRAGMA foreign_keys=ON")


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        with _foreign_keys_off(connection):
            _run(connection)
        return
    url = config.attributes.get("url") or Settings().database_url
    engine = create_db_engine(url)
    try:
        with engine.connect() as conn, _foreign_keys_off(conn):
            _run(conn)
            conn.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise SystemExit("Offline (SQL script) migrations are not supported; run `tidings db upgrade`.")
run_migrations_online()
