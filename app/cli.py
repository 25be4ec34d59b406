"""The `tidings` command (Typer). Exit status 0 on success, 1 on a user error with one line on stderr."""

from __future__ import annotations

import asyncio
import errno
import hashlib
import hmac
import logging
import logging.config
import os
import signal
import socket
import sys
from typing import Annotated, Any

import typer
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.cli_commands import (
    bounces,
    contacts_import,
    db,
    dkim,
    forms,
    lists,
    oauth_clients,
    tokens,
    users,
    version,
)
from app.cli_commands.common import cli_settings, fail, migrate, with_session
from app.config import Settings, masked_url, served_base_url
from app.db import create_db_engine, make_session_factory
from app.identity.accounts import create_user, find_user_by_email
from app.identity.tokens import TOKEN_PREFIX, hash_token
from app.kit.heap import freeze_start_up_objects, pause_collections, resume_collections
from app.logs import logging_config
from app.models import PersonalToken

cli = typer.Typer(
    no_args_is_help=True, add_completion=False, help="Tidings: email campaigns, feeds and watches."
)
cli.callback()(version.root)
cli.add_typer(db.db_cli, name="db")
cli.add_typer(users.users_cli, name="users")
cli.add_typer(tokens.tokens_cli, name="tokens")
cli.add_typer(contacts_import.contacts_cli, name="contacts")
cli.add_typer(forms.forms_cli, name="forms")
cli.add_typer(oauth_clients.oauth_clients_cli, name="oauth-clients")
cli.add_typer(bounces.bounces_cli, name="bounces")
cli.add_typer(dkim.dkim_cli, name="dkim")
cli.add_typer(lists.lists_cli, name="lists")

# uvicorn's supervisor pings each HTTP worker process and replaces one that does not answer in time.
# Its own 5 s replaced busy workers of a loaded machine again and again (each losing its requests in
# flight); a worker that is truly stuck for 30 s is still replaced.
WORKER_HEALTHCHECK_SECONDS = 30
DEMO_EMAIL = "demo@example.com"
DEMO_USERNAME = "demo"
DEMO_PASSWORD = "demo-password"


def refuse_unusable_port(host: str, port: int, option: str) -> None:
    """Exit 1 with one line, before anything starts, when host:port is no port or cannot be listened on
    (another server has it, the address is not this machine's): a bind tried and let go at once."""
    if not 1 <= port <= 65535:
        raise fail(f"{option} {port} is not a port: give a number from 1 to 65535")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.socket(family, kind, proto) as probe:
            # As uvicorn binds: a port left in TIME_WAIT by the last run is free, one listened on is not.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if exc.errno == errno.EADDRINUSE:
            reason += f": another server listens there; stop it or give another {option}"
        raise fail(f"cannot listen on {host}:{port} ({option}): {reason}") from exc


@cli.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on")] = 8000,
    no_scheduler: Annotated[
        bool, typer.Option("--no-scheduler", help="Serve HTTP only, no background work")
    ] = False,
    demo: Annotated[bool, typer.Option("--demo", help="Make a demo account and print its token")] = False,
    workers: Annotated[int, typer.Option(help="HTTP worker processes")] = 1,
    worker_timeout: Annotated[
        int,
        typer.Option(
            help="With --workers 2 or more: seconds a worker process may leave the supervisor's health "
            "check unanswered before it is killed and replaced"
        ),
    ] = WORKER_HEALTHCHECK_SECONDS,
) -> None:
    """Migrate the database to head, then serve the three APIs."""
    import uvicorn

    from app.http_supervisor import run_supervised

    settings = cli_settings()
    refuse_unusable_port(host, port, "--port")
    if workers < 1:
        raise fail(f"--workers {workers}: give 1 or more HTTP worker processes")
    if worker_timeout < 1:
        raise fail(f"--worker-timeout {worker_timeout}: give 1 or more seconds")
    if demo and settings.env == "production":
        raise fail(
            f"--demo makes an account with a published password ({DEMO_USERNAME} / {DEMO_PASSWORD}): "
            "refused with TIDINGS_ENV=production"
        )
    base_url_is_set = settings.base_url_is_set
    if not base_url_is_set:
        # Links in emails, the Origin check and OAuth follow the address served. The environment reaches
        # every process uvicorn starts.
        os.environ["TIDINGS_BASE_URL"] = served_base_url(host, port)
        settings = cli_settings()
    migrate(settings)
    if demo:
        token = with_session(settings, lambda s: ensure_demo(s, settings))
        typer.echo(f"Demo account: {DEMO_EMAIL}")
        typer.echo(f"Username:     {DEMO_USERNAME}")
        typer.echo(f"Password:     {DEMO_PASSWORD}")
        typer.echo(f"API token:    {token}")
    echo_banner(settings, base_url_is_set=base_url_is_set)
    logging.config.dictConfig(logging_config(settings.log_format))
    warn_if_relay_unreachable(settings)
    if no_scheduler:
        # uvicorn builds the app itself (possibly in several processes): the environment reaches them all.
        os.environ["TIDINGS_SCHEDULER"] = "false"
    server: dict[str, Any] = {
        "factory": True,
        "host": host,
        "port": port,
        "workers": workers,
        "timeout_worker_healthcheck": worker_timeout,
        "log_level": "info",
        "log_config": logging_config(settings.log_format),
    }
    if workers > 1:
        # uvicorn's supervisor, saying why it replaces a worker process (app/http_supervisor.py).
        run_supervised(uvicorn.Config("app.main:create_app", **server))
    else:
        uvicorn.run("app.main:create_app", **server)


@cli.command()
def worker(
    once: Annotated[
        bool,
        typer.Option(
            "--once",
            help="Send the due email, poll the due feeds and run the due watch runs, then exit",
        ),
    ] = False,
    metrics_port: Annotated[
        int | None, typer.Option(help="Serve this process's Prometheus metrics on this port")
    ] = None,
    metrics_host: Annotated[str, typer.Option(help="Address of the metrics port")] = "127.0.0.1",
) -> None:
    """Run the background jobs only, no HTTP: sending, feed polling and watch runs beside the API."""
    settings = cli_settings()
    if metrics_port is not None:
        refuse_unusable_port(metrics_host, metrics_port, "--metrics-port")
    # Until the jobs are started (_run_worker): start-up makes no garbage worth collecting.
    pause_collections()
    migrate(settings)
    if metrics_port is not None:
        from prometheus_client import start_http_server

        start_http_server(metrics_port, addr=metrics_host)
    logging.config.dictConfig(logging_config(settings.log_format))
    warn_if_relay_unreachable(settings)
    # asyncio's own event loop, not uvloop (which `tidings serve` runs on under uvicorn): uvloop makes
    # its send() and recv() system calls holding the interpreter lock, so the worker threads that write
    # the send outcomes (psycopg lets the lock go around each libpq call) wait for it while the loop is
    # busy, up to the switch interval (5 ms) each time, and the senders wait for the places those
    # writes free (recorder.py); asyncio's loop lets the lock go at each system call. The measures, for
    # and against, are in docs/performance.md ("The third session of 2026-11-27").
    with asyncio.Runner() as runner:
        runner.run(_run_worker(settings, once=once))


async def _run_worker(settings: Settings, *, once: bool) -> None:
    from app.db import is_sqlite_url, make_write_session_factory
    from app.scheduler import Scheduler

    engine = create_db_engine(settings.database_url)
    # On SQLite every job transaction is a writer's (BEGIN IMMEDIATE), as in the serving process.
    sqlite = is_sqlite_url(settings.database_url)
    factory = (make_write_session_factory if sqlite else make_session_factory)(engine)
    scheduler = Scheduler(settings, factory)
    try:
        if once:
            resume_collections()
            done = await scheduler.drain()
            typer.echo(
                f"sent {done.emails} emails, polled {done.feeds} feeds, ran {done.runs} watch runs,"
                f" delivered {done.events} webhook events"
            )
            return
        await scheduler.start()
        freeze_start_up_objects()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        typer.echo(f"Worker:       background jobs on {type(loop).__module__.split('.')[0]}'s event loop")
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()
    finally:
        await scheduler.stop()
        engine.dispose()


def warn_if_relay_unreachable(settings: Settings) -> None:
    """One WARNING as a sending process starts when TIDINGS_SMTP_URL's relay does not answer: its emails
    would wait in the queue, retried, with nothing else to say why."""
    if not settings.smtp_url:
        return
    from app.mail.sending.transport import parse_relays, relay_problem

    for relay in parse_relays(settings.smtp_url):
        problem = relay_problem(relay)
        if problem is not None:
            logging.getLogger("tidings.sending").warning(
                "the SMTP relay %s:%s (TIDINGS_SMTP_URL) does not answer: %s; emails wait in the queue and "
                "are retried until it does",
                relay.hostname,
                relay.port,
                problem,
            )


def echo_banner(settings: Settings, *, base_url_is_set: bool) -> None:
    """What a server is about to use, so an operator sees which data and address it picked up."""
    base = settings.base_url.rstrip("/")
    set_by = "TIDINGS_BASE_URL"
    if not base_url_is_set:
        set_by = "the address served: set TIDINGS_BASE_URL behind a proxy or on a public host"
    typer.echo(f"Database:     {masked_url(settings.database_url)}")
    typer.echo(f"Var dir:      {settings.var_dir.resolve()}")
    typer.echo(f"Base URL:     {base} (in emails and OAuth; {set_by})")
    typer.echo(f"Docs:         {base}/docs")
    if settings.smtp_url:
        typer.echo(f"Outbox:       {masked_url(settings.smtp_url)} (TIDINGS_SMTP_URL)")
    else:
        outbox = settings.outbox_path.resolve()
        typer.echo(f"Outbox:       {outbox} (where email goes while TIDINGS_SMTP_URL is unset)")


def ensure_demo(session: Session, settings: Settings) -> str:
    """The demo user and a token derived from the secret key, so every run prints the same token."""
    user = find_user_by_email(session, DEMO_EMAIL)
    if user is None:
        user = create_user(
            session, email=DEMO_EMAIL, name="Demo", username=DEMO_USERNAME, password=DEMO_PASSWORD
        )
    digest = hmac.new(
        settings.resolved_secret_key.encode(), b"tidings-demo-token", hashlib.sha256
    ).hexdigest()
    token = f"{TOKEN_PREFIX}demo_{digest[:40]}"
    exists = session.scalars(
        select(PersonalToken.id).where(PersonalToken.token_hash == hash_token(token))
    ).first()
    if exists is None:
        session.add(
            PersonalToken(user_id=user.id, name="demo", token_hash=hash_token(token), prefix=token[:12])
        )
    return token


@cli.command("openapi")
def openapi_write() -> None:
    """Write the committed OpenAPI documents under openapi/ from the code."""
    from app.openapi_docs import write_documents

    for path in write_documents():
        typer.echo(str(path))


def main() -> None:
    try:
        cli()
    except KeyboardInterrupt:
        sys.exit(130)
