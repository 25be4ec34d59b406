"""`tidings users`: the operator's view of users and their accounts."""

from __future__ import annotations

from typing import Annotated

import typer
from sqlalchemy.orm import Session

from app.cli import migrate, users_cli, with_session
from app.config import Settings
from app.identity.accounts import create_user


@users_cli.command("create")
def users_create(
    email: Annotated[str, typer.Option(help="Email, unique")],
    name: Annotated[str, typer.Option(help="Display name")],
    username: Annotated[str | None, typer.Option(help="Username for sign-in")] = None,
    password: Annotated[str | None, typer.Option(help="Password for sign-in")] = None,
    plan: Annotated[str, typer.Option(help="free, lifetime or empire")] = "empire",
    contact_limit: Annotated[int, typer.Option(help="Contacts the account may hold")] = 10000,
    staff: Annotated[bool, typer.Option("--staff", help="Mark the user as staff")] = False,
    timezone: Annotated[str, typer.Option(help="IANA time zone of the account")] = "UTC",
    warmup_days: Annotated[int, typer.Option(help="Days before the account may send")] = 0,
    daily_send_limit: Annotated[
        int | None,
        typer.Option(help="Emails a UTC day (default: TIDINGS_DAILY_SEND_LIMIT; 0: no cap)"),
    ] = None,
) -> None:
    """Make a user in a new account; prints the user id."""
    settings = Settings()
    migrate(settings)

    def work(session: Session) -> int:
        user = create_user(
            session,
            email=email,
            name=name,
            username=username,
            password=password,
            plan=plan,
            contact_limit=contact_limit,
            timezone=timezone,
            is_staff=staff,
            warmup_days=warmup_days,
            daily_send_limit=daily_send_limit,
        )
        return user.id

    typer.echo(with_session(settings, work))
