"""`tidings users`: the operator's view of users and their accounts (create, list, update, set-password)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from sqlalchemy.orm import Session

from app.cli_commands.common import cli_settings, fail, migrate, with_session
from app.cli_commands.output import print_table, when, yes_no
from app.identity.accounts import (
    check_password,
    create_user,
    set_user_password,
    update_account_settings,
    user_by_email,
    user_summaries,
)
from app.kit.errors import DomainError

users_cli = typer.Typer(no_args_is_help=True, help="Users and their accounts.")


def read_password(*, from_stdin: bool) -> str:
    """The new password from stdin (scripts: the first line) or a hidden prompt asked twice."""
    if from_stdin:
        text = typer.get_text_stream("stdin").readline()
        return text.removesuffix("\n").removesuffix("\r")
    # On stderr, so stdout holds only the result (a script may read the new user's id from it).
    return str(typer.prompt("Password", hide_input=True, confirmation_prompt=True, err=True))


PasswordStdin = Annotated[
    bool,
    typer.Option("--password-stdin", help="Read the password from the first line of stdin (scripts)"),
]


@users_cli.command("create")
def users_create(
    email: Annotated[str, typer.Option(help="Email, unique")],
    name: Annotated[str, typer.Option(help="Display name")],
    username: Annotated[str | None, typer.Option(help="Username for sign-in")] = None,
    password: Annotated[
        str | None,
        typer.Option(help="Password for sign-in (seen in shell history: prefer the prompt or stdin)"),
    ] = None,
    password_stdin: PasswordStdin = False,
    no_password: Annotated[
        bool, typer.Option("--no-password", help="No sign-in password: API tokens only, no prompt")
    ] = False,
    plan: Annotated[str, typer.Option(help="free, lifetime or empire")] = "empire",
    contact_limit: Annotated[int, typer.Option(help="Contacts the account may hold")] = 10000,
    staff: Annotated[bool, typer.Option("--staff", help="Mark the user as staff")] = False,
    timezone: Annotated[str, typer.Option(help="IANA time zone of the account")] = "UTC",
    warmup_days: Annotated[
        int, typer.Option(help="Whole days of the account's time zone before it may send")
    ] = 0,
    daily_send_limit: Annotated[
        int | None,
        typer.Option(
            help="Emails a day of the account's time zone (default: TIDINGS_DAILY_SEND_LIMIT; 0: no cap)"
        ),
    ] = None,
) -> None:
    """Make a user in a new account; prints the user id.

    The password follows sign-up's rules (8 to 128 characters). Without --password, --password-stdin
    or --no-password it is asked for at a terminal; run from a script, the user gets no password.
    """
    if sum([password is not None, password_stdin, no_password]) > 1:
        raise fail("give one of --password, --password-stdin and --no-password")
    if password_stdin:
        password = read_password(from_stdin=True)
    elif password is None and not no_password and sys.stdin.isatty():
        password = read_password(from_stdin=False)
    if password is not None:
        _check(password)
    settings = cli_settings()
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
    if password is None and not no_password:
        typer.echo(
            "note: no password set (stdin is not a terminal); "
            f"set one with `tidings users set-password {email}`",
            err=True,
        )


@users_cli.command("list")
def users_list() -> None:
    """Every user with their account's plan, contacts held and limits."""
    settings = cli_settings()
    migrate(settings)
    users = with_session(settings, user_summaries)
    print_table(
        [
            "ID",
            "EMAIL",
            "NAME",
            "USERNAME",
            "PLAN",
            "CONTACTS",
            "DAILY SENDS",
            "STAFF",
            "PASSWORD",
            "CREATED",
        ],
        [
            [
                user.id,
                user.email,
                user.name,
                user.username,
                user.plan,
                f"{user.contacts_count}/{user.contact_limit}",
                "default" if user.daily_send_limit is None else user.daily_send_limit or "no cap",
                yes_no(user.is_staff),
                yes_no(user.has_password),
                when(user.created_at),
            ]
            for user in users
        ],
        empty="no users",
    )


@users_cli.command("update")
def users_update(
    email: Annotated[str, typer.Argument(help="The user's email")],
    plan: Annotated[str | None, typer.Option(help="free, lifetime or empire")] = None,
    contact_limit: Annotated[int | None, typer.Option(help="Contacts the account may hold")] = None,
    daily_send_limit: Annotated[
        int | None, typer.Option(help="Emails a day of the account's time zone (0: no cap)")
    ] = None,
    default_daily_send_limit: Annotated[
        bool,
        typer.Option("--default-daily-send-limit", help="Back to the server's TIDINGS_DAILY_SEND_LIMIT"),
    ] = False,
    staff: Annotated[
        bool | None, typer.Option("--staff/--no-staff", help="Mark or unmark the user as staff")
    ] = None,
) -> None:
    """Change a user's plan, limits or staff flag; prints the account as it now is."""
    if (plan, contact_limit, daily_send_limit, staff) == (None,) * 4 and not default_daily_send_limit:
        raise fail(
            "nothing to change: give --plan, --contact-limit, --daily-send-limit, "
            "--default-daily-send-limit, --staff or --no-staff"
        )
    settings = cli_settings()
    migrate(settings)

    def work(session: Session) -> str:
        user = user_by_email(session, email)
        account = update_account_settings(
            session,
            user,
            plan=plan,
            contact_limit=contact_limit,
            daily_send_limit=daily_send_limit,
            default_daily_send_limit=default_daily_send_limit,
            is_staff=staff,
        )
        daily = account.daily_send_limit
        return (
            f"{user.email}: plan {account.plan}, contacts {account.contacts_count}/{account.contact_limit}, "
            f"daily sends {'default' if daily is None else daily or 'no cap'}, staff {yes_no(user.is_staff)}"
        )

    typer.echo(with_session(settings, work))


@users_cli.command("set-password")
def users_set_password(
    email: Annotated[str, typer.Argument(help="The user's email")],
    password_stdin: PasswordStdin = False,
) -> None:
    """Set a user's sign-in password (asked twice, hidden; never on the command line) and sign them out
    everywhere. Their API tokens keep working."""
    password = read_password(from_stdin=password_stdin)
    _check(password)
    settings = cli_settings()
    migrate(settings)
    ended = with_session(
        settings, lambda session: set_user_password(session, user_by_email(session, email), password)
    )
    typer.echo(f"password set for {email}; {ended} sign-in sessions ended")


def _check(password: str) -> None:
    """Sign-up's rules, before anything else is done."""
    try:
        check_password(password)
    except DomainError as exc:
        raise fail(exc.message) from exc
