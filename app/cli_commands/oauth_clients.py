"""`tidings oauth-clients list|delete` (`oauth-clients create` is in app/cli.py)."""

from __future__ import annotations

from typing import Annotated

import typer
from sqlalchemy.orm import Session

from app.cli import cli_settings, migrate, oauth_clients_cli, with_session
from app.cli_commands.output import print_table, when
from app.identity.oauth.clients import clients_with_owners, delete_client


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
