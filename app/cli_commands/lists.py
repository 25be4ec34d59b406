"""`tidings lists create|list`: an account's contact lists. The email API's modules load in the commands
that use them, not when the command line starts."""

from __future__ import annotations

from typing import Annotated

import typer
from sqlalchemy.orm import Session

from app.cli_commands.common import cli_settings, migrate, with_session
from app.cli_commands.output import print_table, when
from app.identity.accounts import user_by_email

lists_cli = typer.Typer(no_args_is_help=True, help="Contact lists.")


@lists_cli.command("create")
def lists_create(
    email: Annotated[str, typer.Option(help="The account owner's email")],
    name: Annotated[str, typer.Option(help="The list's name")],
) -> None:
    """Make a contact list; prints its id."""
    from app.mail.list_service import make_list

    settings = cli_settings()
    migrate(settings)

    def work(session: Session) -> int:
        user = user_by_email(session, email)
        return make_list(session, user.account_id, user.id, name).id

    typer.echo(with_session(settings, work))


@lists_cli.command("list")
def lists_list(email: Annotated[str, typer.Option(help="The account owner's email")]) -> None:
    """The account's lists: id, name, contacts on it and when it was made."""
    from app.mail.list_service import account_lists

    settings = cli_settings()
    migrate(settings)
    lists = with_session(
        settings, lambda session: account_lists(session, user_by_email(session, email).account_id)
    )
    print_table(
        ["ID", "NAME", "CONTACTS", "CREATED"],
        [[item.id, item.name, item.contact_count, when(item.created_at)] for item in lists],
        empty="no lists",
    )
