"""Alembic driven from code: `tidings serve` and `tidings db upgrade` migrate to head with this.

The script directory is the package `app._migrations` (the top-level migrations/ of the source tree,
shipped inside the package by setup.py), so an installed wheel migrates without the source tree and
from any working directory. alembic.ini at the top of the tree is for developers' `alembic revision`.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext

from app.db import create_db_engine


def migrations_dir() -> Path:
    # A package installed as files (wheel, editable install or source tree), never from a zip archive.
    return Path(str(files("app._migrations")))


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("path_separator", "os")
    config.attributes["url"] = url
    return config


def upgrade_to_head(url: str) -> None:
    command.upgrade(alembic_config(url), "head")


def current_revision(url: str) -> str | None:
    engine = create_db_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()
