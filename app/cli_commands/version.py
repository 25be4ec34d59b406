"""`tidings --version`."""

from __future__ import annotations

from typing import Annotated

import typer

from app.kit.release import installed_version


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"tidings {installed_version()}")
        raise typer.Exit()


def root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit"),
    ] = False,
) -> None:
    """Tidings: email campaigns, feeds and watches."""
