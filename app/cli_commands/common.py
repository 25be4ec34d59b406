"""What the operator's commands share: the settings read (a bad one exits 1 with one line), one
transaction on the configured database, the migration every command runs first, and their errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import typer
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.config import Settings, SettingsError, load_settings, masked_url
from app.db import create_db_engine, make_session_factory, transaction
from app.kit.errors import DomainError

T = TypeVar("T")


def fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(1)


def cli_settings() -> Settings:
    """The settings, every one checked before the command does anything: a bad one exits 1 with one
    line naming it, what is wrong and what is allowed."""
    try:
        return load_settings()
    except SettingsError as exc:
        raise fail(str(exc)) from exc


def with_session(settings: Settings, work: Callable[[Session], T]) -> T:
    """Run `work` in one transaction on the configured database; user errors exit 1 with one line."""
    engine = create_db_engine(settings.database_url)
    try:
        with transaction(make_session_factory(engine)) as session:
            return work(session)
    except DomainError as exc:
        raise fail(exc.message) from exc
    except SQLAlchemyError as exc:
        raise fail(f"database error: {exc.__class__.__name__}: {str(exc).splitlines()[0]}") from exc
    finally:
        engine.dispose()


def migrate(settings: Settings) -> None:
    """Refuse an unsafe production configuration, then bring the database to the newest revision."""
    from app.migrate import upgrade_to_head

    problems = settings.production_problems()
    if problems:
        raise fail("; ".join(problems))
    try:
        upgrade_to_head(settings.database_url)
    except SQLAlchemyError as exc:
        target = masked_url(settings.database_url)
        raise fail(f"cannot migrate {target}: {str(exc).splitlines()[0]}") from exc


def note_assumed_base_url(settings: Settings) -> None:
    """A command that prints the server's public URLs, run without TIDINGS_BASE_URL, says which address
    it assumed and how to give the real one (on stderr: stdout stays the answer a script reads)."""
    if not settings.base_url_is_set:
        typer.echo(
            f"note: TIDINGS_BASE_URL is not set, so the URL assumes the server answers at "
            f"{settings.base_url}; set TIDINGS_BASE_URL to the address people reach it at",
            err=True,
        )
