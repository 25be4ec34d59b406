"""`tidings db upgrade|current`: the database's migrations."""

from __future__ import annotations

import typer
from sqlalchemy.exc import SQLAlchemyError

from app.cli_commands.common import cli_settings, fail, migrate

db_cli = typer.Typer(no_args_is_help=True, help="Database migrations.")


@db_cli.command("upgrade")
def db_upgrade() -> None:
    """Migrate the database to the newest revision."""
    migrate(cli_settings())
    typer.echo("database is at head")


@db_cli.command("current")
def db_current() -> None:
    """Print the database's current revision."""
    from app.migrate import current_revision

    try:
        typer.echo(current_revision(cli_settings().database_url) or "(empty database)")
    except SQLAlchemyError as exc:
        raise fail(str(exc).splitlines()[0]) from exc
