"""`tidings oauth-clients create|list|delete`: the OAuth 2.0 clients of the email API."""

from __future__ import annotations

from typing import Annotated

import typer
from sqlalchemy.orm import Session

from app.cli_commands.common import cli_settings, migrate, with_session
from app.cli_commands.output import print_table, when
from app.identity.accounts import user_by_email
from app.identity.oauth.clients import clients_with_owners, delete_client

oauth_clients_cli = typer.Typer(no_args_is_help=True, help="OAuth 2.0 clients of the email API.")


@oauth_clients_cli.command("list")
def oauth_clients_list() -> None:
    """Every registered client: client_id, name, owner, whether it has a secret, redirect URIs."""
    settings = cli_settings()
    migrate(settings)

    def work(session: Session) -> list[list[object]]:
        return [
            [
                client.client_id,
                client.name,
                owner,
                "public" if client.client_secret_hash is None else "confidential",
                when(client.created_at),
                " ".join(client.redirect_uris.split("\n")),
            ]
            for client, owner in clients_with_owners(session)
        ]

    rows = with_session(settings, work)
    print_table(["CLIENT ID", "NAME", "OWNER", "TYPE", "CREATED", "REDIRECT URIS"], rows, empty="no clients")


@oauth_clients_cli.command("delete")
def oauth_clients_delete(
    client_id: Annotated[str, typer.Argument(help="The client's client_id (see `oauth-clients list`)")],
) -> None:
    """Delete a client with its codes and tokens: the integrations using it stop working."""
    settings = cli_settings()
    migrate(settings)

    def work(session: Session) -> str:
        client = delete_client(session, client_id)
        return f"deleted OAuth client {client_id} ({client.name}) and its tokens"

    typer.echo(with_session(settings, work))


@oauth_clients_cli.command("create")
def oauth_clients_create(
    email: Annotated[str, typer.Option(help="The email of the user registering the client")],
    name: Annotated[str, typer.Option(help="The client's name, shown on the consent page")],
    redirect_uri: Annotated[
        list[str],
        typer.Option(help="Where codes are sent: https, or http on loopback (repeatable)"),
    ],
    public: Annotated[
        bool,
        typer.Option("--public", help="No secret (an app that cannot keep one): PKCE alone proves it"),
    ] = False,
) -> None:
    """Register an OAuth client; prints its client_id and client_secret (the secret is not shown again)."""
    from app.identity.oauth.clients import register_client

    settings = cli_settings()
    migrate(settings)

    def work(session: Session) -> tuple[str, str | None]:
        client, secret = register_client(
            session, user_by_email(session, email), name, redirect_uri, public=public
        )
        return client.client_id, secret

    client_id, secret = with_session(settings, work)
    typer.echo(f"client_id: {client_id}")
    if secret is not None:
        typer.echo(f"client_secret: {secret}")
