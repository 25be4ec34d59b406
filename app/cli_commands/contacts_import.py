"""`tidings contacts import`: contacts from a CSV file."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import Progress
from sqlalchemy.orm import Session

from app.cli import contacts_cli, fail, migrate, user_by_email, with_session
from app.config import Settings
from app.identity.principal import principal_of
from app.kit.errors import DomainError
from app.models import Account

IMPORT_BATCH = 1000


def read_csv_rows(path: Path) -> Iterator[dict[str, str]]:
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames is None or "email" not in [f.strip().lower() for f in reader.fieldnames]:
            raise DomainError(1, f"{path} has no 'email' column in its header")
        for row in reader:
            yield {(k or "").strip().lower(): (v or "").strip() for k, v in row.items()}


@contacts_cli.command("import")
def contacts_import(
    file: Annotated[Path, typer.Argument(help="CSV with an email column; first_name, last_name optional")],
    email: Annotated[str, typer.Option(help="The account owner's email")],
    list_id: Annotated[
        list[int] | None, typer.Option("--list", help="Add every contact to this list")
    ] = None,
) -> None:
    """Import contacts from CSV in batches of 1000, with a progress bar."""
    from app.mail.contacts import ContactWrite, upsert_contacts
    from app.mail.input import validate_email_text

    if not file.is_file():
        raise fail(f"no such file: {file}")
    settings = Settings()
    migrate(settings)
    created = updated = skipped = 0

    def import_batch(rows: list[dict[str, str]]) -> None:
        nonlocal created, updated, skipped

        def work(session: Session) -> None:
            nonlocal created, updated, skipped
            user = user_by_email(session, email)
            principal = principal_of(user, session.get_one(Account, user.account_id))
            writes = []
            for row in rows:
                address = row.get("email", "")
                if not validate_email_text(address):
                    skipped += 1
                    continue
                writes.append(
                    ContactWrite(
                        email=address,
                        first_name=row.get("first_name") or None,
                        last_name=row.get("last_name") or None,
                        lists=list(list_id or []),
                    )
                )
            result = upsert_contacts(session, principal, writes, validation_status=400)
            created += result.created
            updated += result.updated

        with_session(settings, work)

    try:
        with Progress(transient=True) as progress:
            task = progress.add_task("importing", total=None)
            batch: list[dict[str, str]] = []
            for row in read_csv_rows(file):
                batch.append(row)
                if len(batch) == IMPORT_BATCH:
                    import_batch(batch)
                    progress.advance(task, len(batch))
                    batch = []
            if batch:
                import_batch(batch)
                progress.advance(task, len(batch))
    except (DomainError, UnicodeDecodeError, csv.Error) as exc:
        raise fail(str(exc)) from exc
    typer.echo(f"created {created}, updated {updated}, skipped {skipped} invalid")
