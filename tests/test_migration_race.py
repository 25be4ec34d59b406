"""Processes that start together (API replicas, workers) each migrate to head; on PostgreSQL an advisory
lock makes them take turns instead of racing to create the same tables."""

from __future__ import annotations

import subprocess
import sys

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from app.db import is_sqlite_url
from app.migrate import current_revision


def test_four_processes_migrating_one_new_database_all_succeed(database_url: str) -> None:
    if is_sqlite_url(database_url):
        pytest.skip("PostgreSQL only: SQLite is the single-process embedded set-up")
    scratch = make_url(database_url).set(database="tidings_migration_race")
    admin = create_engine(make_url(database_url).set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text("DROP DATABASE IF EXISTS tidings_migration_race"))
        conn.execute(text("CREATE DATABASE tidings_migration_race"))
    url = scratch.render_as_string(hide_password=False)
    try:
        code = f"from app.migrate import upgrade_to_head; upgrade_to_head({url!r})"
        processes = [subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE) for _ in range(4)]
        for process in processes:
            _, stderr = process.communicate(timeout=120)
            assert process.returncode == 0, stderr.decode()[-2000:]
        assert current_revision(url) == current_revision(database_url)
    finally:
        with admin.connect() as conn:
            conn.execute(text("DROP DATABASE IF EXISTS tidings_migration_race WITH (FORCE)"))
        admin.dispose()
