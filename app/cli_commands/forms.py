"""`tidings forms create|list`: hosted sign-up forms."""

from __future__ import annotations

from typing import Annotated

import typer
from sqlalchemy.orm import Session

from app.cli_commands.common import cli_settings, migrate, note_assumed_base_url, with_session
from app.cli_commands.output import print_table, when
from app.identity.accounts import user_by_email

forms_cli = typer.Typer(no_args_is_help=True, help="Hosted sign-up forms.")


@forms_cli.command("list")
def forms_list(email: Annotated[str, typer.Option(help="The account owner's email")]) -> None:
    """The account's hosted sign-up forms: id, title, the lists they subscribe to and their public URL."""
    from app.mail.form_service import account_forms

    settings = cli_settings()
    migrate(settings)
    base = settings.base_url.rstrip("/")

    def work(session: Session) -> list[list[object]]:
        return [
            [form.id, form.title, ",".join(map(str, lists)), when(form.created_at), f"{base}/f/{form.id}"]
            for form, lists in account_forms(session, user_by_email(session, email).account_id)
        ]

    rows = with_session(settings, work)
    print_table(["ID", "TITLE", "LISTS", "CREATED", "URL"], rows, empty="no forms")
    if rows:
        note_assumed_base_url(settings)


@forms_cli.command("create")
def forms_create(
    email: Annotated[str, typer.Option(help="The account owner's email")],
    title: Annotated[str, typer.Option(help="The form's title")],
    list_id: Annotated[list[int], typer.Option("--list", help="A list the form subscribes to (repeatable)")],
) -> None:
    """Make a hosted sign-up form; prints its id and public URL."""
    from app.mail.form_service import create_form

    settings = cli_settings()
    migrate(settings)

    def work(session: Session) -> int:
        user = user_by_email(session, email)
        return create_form(session, user.account_id, title, list_id).id

    form_id = with_session(settings, work)
    typer.echo(f"{form_id} {settings.base_url.rstrip('/')}/f/{form_id}")
    note_assumed_base_url(settings)
