"""`tidings tokens create|list|revoke`: personal access tokens across users."""

from __future__ import annotations

from typing import Annotated

import typer
from sqlalchemy.orm import Session

from app.cli_commands.common import cli_settings, migrate, with_session
from app.cli_commands.output import print_table, when
from app.identity.accounts import user_by_email
from app.identity.tokens import create_personal_token, live_tokens_with_owners, revoke_token_by_id

tokens_cli = typer.Typer(no_args_is_help=True, help="Personal access tokens.")


@tokens_cli.command("list")
def tokens_list(
    email: Annotated[str | None, typer.Option(help="Only this user's tokens")] = None,
) -> None:
    """The tokens that still work: id, owner, name, the token's first characters, when made and last used."""
    settings = cli_settings()
    migrate(settings)

    def work(session: Session) -> list[list[object]]:
        user_id = user_by_email(session, email).id if email is not None else None
        return [
            [
                token.id,
                owner,
                token.name or "-",
                f"{token.prefix}...",
                when(token.created_at),
                when(token.last_used_at),
            ]
            for token, owner in live_tokens_with_owners(session, user_id)
        ]

    rows = with_session(settings, work)
    print_table(["ID", "OWNER", "NAME", "TOKEN", "CREATED", "LAST USED"], rows, empty="no tokens")


@tokens_cli.command("revoke")
def tokens_revoke(
    token_id: Annotated[int, typer.Argument(help="The token's id (see `tokens list`)")],
) -> None:
    """Revoke a token: it stops working within a second on every server."""
    settings = cli_settings()
    migrate(settings)

    def work(session: Session) -> str:
        token = revoke_token_by_id(session, token_id)
        return f"revoked token {token.id} ({token.name or 'unnamed'}, {token.prefix}...)"

    typer.echo(with_session(settings, work))


@tokens_cli.command("create")
def tokens_create(
    email: Annotated[str, typer.Option(help="The token owner's email")],
    name: Annotated[str, typer.Option(help="A label for the token")] = "",
) -> None:
    """Make a personal access token; prints the token alone (it is not shown again)."""
    settings = cli_settings()
    migrate(settings)
    typer.echo(with_session(settings, lambda s: create_personal_token(s, user_by_email(s, email), name)[1]))
