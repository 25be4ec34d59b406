"""`tidings bounces ingest`: one bounce (a DSN) on standard input, as a Postfix pipe transport hands it over.

The exit status follows sysexits.h, which Postfix's pipe(8) reads: 0 when the message was applied or
ignored (not a bounce, unreadable, or naming no email of ours: retrying would not change that), 75
(EX_TEMPFAIL) when the database cannot be reached or fails, so Postfix keeps the message and tries again
later, 78 (EX_CONFIG) when the settings are unusable.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from sqlalchemy.exc import SQLAlchemyError

from app.config import SettingsError, load_settings

bounces_cli = typer.Typer(no_args_is_help=True, help="The bounce mailbox (VERP).")

EX_OK = 0
EX_TEMPFAIL = 75
EX_CONFIG = 78


@bounces_cli.command("ingest")
def bounces_ingest(
    recipient: Annotated[
        list[str] | None,
        typer.Option(
            "--recipient",
            help="The envelope recipient the MTA delivered it to (Postfix: ${recipient}); repeatable",
        ),
    ] = None,
) -> None:
    """Read one DSN from standard input and mark the email it is about bounced (hard for a 5.x.x status,
    soft for 4.x.x)."""
    from app.db import create_db_engine, make_session_factory, transaction
    from app.kit.time import utcnow
    from app.mail.bounces.bounce_mailbox import MAX_MESSAGE_BYTES, ingest_message
    from app.mail.sending.queue import BounceRule
    from app.mail.sending.tokens import MailTokens

    raw = sys.stdin.buffer.read(MAX_MESSAGE_BYTES)
    while sys.stdin.buffer.read(1 << 16):  # the rest is not read, but taken: the writer must not block
        pass
    try:
        settings = load_settings()
        tokens = MailTokens(settings.resolved_secret_key)
    except (SettingsError, ValueError, OSError) as exc:
        typer.echo(f"error: unusable settings: {exc}", err=True)
        raise typer.Exit(EX_CONFIG) from exc
    rule = BounceRule.from_settings(settings)
    try:
        engine = create_db_engine(settings.database_url)
        try:
            with transaction(make_session_factory(engine)) as session:
                ingested = ingest_message(session, raw, tokens, utcnow(), rule, recipient or ())
        finally:
            engine.dispose()
    except SQLAlchemyError as exc:
        typer.echo(f"error: database unavailable, try again later: {str(exc).splitlines()[0]}", err=True)
        raise typer.Exit(EX_TEMPFAIL) from exc
    typer.echo(ingested.describe())
    raise typer.Exit(EX_OK)
