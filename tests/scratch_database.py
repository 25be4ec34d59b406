"""A PostgreSQL database of its own for a test whose rows must be committed, because another connection
(psycopg's async pool, another process) reads them: made beside the test database, migrated to head,
dropped afterwards. The tests' usual rolled-back transaction is invisible to other connections."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from app.db import create_db_engine, make_session_factory
from app.migrate import upgrade_to_head


@contextmanager
def scratch_database(database_url: str, suffix: str) -> Iterator[str]:
    """The URL of a fresh, migrated database named after the test database, `suffix` and the xdist
    worker (so that test runs against different databases of one server, and the workers of one run,
    do not meet)."""
    base = make_url(database_url)
    name = f"{base.database}_{suffix}_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"
    admin = create_engine(base.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        url = base.set(database=name).render_as_string(hide_password=False)
        upgrade_to_head(url)
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@contextmanager
def scratch_sessions(database_url: str, suffix: str) -> Iterator[tuple[str, sessionmaker[Session]]]:
    """`scratch_database`, with a session factory of its own engine (disposed afterwards)."""
    with scratch_database(database_url, suffix) as url:
        engine = create_db_engine(url)
        try:
            yield url, make_session_factory(engine)
        finally:
            engine.dispose()
