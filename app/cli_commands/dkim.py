"""`tidings dkim create|list|show|delete`: the DKIM keys that sign each sending domain's email. The
email modules load in the commands that use them, not when the command line starts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from sqlalchemy.orm import Session

from app.cli_commands.common import cli_settings, fail, migrate, with_session
from app.cli_commands.output import print_table, when

if TYPE_CHECKING:
    from app.mail.dkim_service import KeyRecord

dkim_cli = typer.Typer(no_args_is_help=True, help="DKIM keys that sign each sending domain's email.")

DomainOption = Annotated[str, typer.Option(help="The sending domain (the part after @ in From)")]


def echo_record(record: KeyRecord) -> None:
    """The DNS record to publish: name and value (what a DNS provider's form asks for), then the
    same as a zone-file line."""
    typer.echo(f"name:   {record.dns_name}")
    typer.echo("type:   TXT")
    typer.echo(f"value:  {record.txt_value}")
    typer.echo(f"zone:   {record.zone_line()}")


@dkim_cli.command("create")
def dkim_create(
    domain: DomainOption,
    selector: Annotated[
        str | None, typer.Option(help="The key's name in DNS [default: tidings<YYYYMM>, +ed for Ed25519]")
    ] = None,
    algorithm: Annotated[
        str, typer.Option(help="rsa (2048 bits), or ed25519 as a second signature beside an RSA key")
    ] = "rsa",
) -> None:
    """Make a signing key for a domain; prints the DNS TXT record to publish."""
    from app.kit.time import utcnow
    from app.mail.dkim_service import create_key

    settings = cli_settings()
    migrate(settings)
    try:
        secret = settings.resolved_secret_key
    except ValueError as exc:
        raise fail(str(exc)) from exc
    record = with_session(
        settings,
        lambda s: create_key(
            s, secret, domain, selector=selector, algorithm=algorithm.strip().lower(), now=utcnow()
        ),
    )
    if record.signing:
        typer.echo(f"{record.algorithm} key {record.selector} of {record.domain}: it signs from now on.")
    else:
        typer.echo(
            f"{record.algorithm} key {record.selector} of {record.domain}: standby, it signs once the "
            f"older {record.algorithm} key of {record.domain} is deleted (`tidings dkim delete`)."
        )
    typer.echo("Publish this DNS record:")
    echo_record(record)
    if not settings.secret_key:
        # The key was sealed with a secret generated into this var folder: a server elsewhere could
        # not open it.
        typer.echo(
            f"note: the private key is sealed with the secret key in {settings.var_dir.resolve()}/secret_key:"
            " run `tidings serve` and `tidings worker` with the same TIDINGS_VAR_DIR, or set"
            " TIDINGS_SECRET_KEY for all of them",
            err=True,
        )


@dkim_cli.command("list")
def dkim_list(
    domain: Annotated[str | None, typer.Option(help="Only this domain's keys")] = None,
) -> None:
    """Every key: domain, selector, algorithm, whether it signs (or waits as a standby), created."""
    from app.mail.dkim_service import list_keys

    settings = cli_settings()
    migrate(settings)
    records = with_session(settings, lambda s: list_keys(s, domain))
    rows: list[list[object]] = [
        [
            r.domain,
            r.selector,
            r.algorithm,
            "signing" if r.signing else "standby",
            when(r.created_at),
            r.dns_name,
        ]
        for r in records
    ]
    print_table(["DOMAIN", "SELECTOR", "ALGORITHM", "STATE", "CREATED", "DNS NAME"], rows, empty="no keys")


@dkim_cli.command("show")
def dkim_show(domain: DomainOption) -> None:
    """The DNS TXT records of a domain's keys, as `dkim create` printed them."""
    from app.mail.dkim_service import list_keys

    settings = cli_settings()
    migrate(settings)
    records = with_session(settings, lambda s: list_keys(s, domain))
    if not records:
        raise fail(f"{domain} has no DKIM key (`tidings dkim create --domain {domain}`)")
    for index, record in enumerate(records):
        if index:
            typer.echo("")
        echo_record(record)


@dkim_cli.command("delete")
def dkim_delete(
    domain: DomainOption,
    selector: Annotated[str, typer.Option(help="The key's selector (see `dkim list`)")],
) -> None:
    """Delete a key: email of the domain is no longer signed with it (a standby key takes over)."""
    from app.mail.dkim_service import delete_key

    settings = cli_settings()
    migrate(settings)

    def work(session: Session) -> KeyRecord:
        return delete_key(session, domain, selector)

    record = with_session(settings, work)
    typer.echo(
        f"deleted the {record.algorithm} key {record.selector} of {record.domain}; keep its DNS record "
        f"{record.dns_name} published for a week: email already sent is checked against it"
    )
