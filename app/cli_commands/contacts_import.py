"""`tidings contacts import`: contacts from a CSV file, with progress on stderr, a report of the rows left
out, and a stop at the contact limit that says where and how to go on."""

from __future__ import annotations

import csv
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.cli_commands.common import cli_settings, fail, migrate
from app.db import create_db_engine, make_session_factory, transaction
from app.kit.errors import DomainError

if TYPE_CHECKING:
    from app.mail.contact_import import RowProblem

contacts_cli = typer.Typer(no_args_is_help=True, help="Contacts.")

# contact_import.IMPORT_BATCH, the console's too; written here because the command line loads the mail
# modules only once a command runs.
IMPORT_BATCH = 1000

T = TypeVar("T")


def progress_text(done: int, total: int, elapsed: float) -> str:
    """`done/total rows (percent), rate, ETA`; the rate and ETA once some time has passed."""
    percent = 100 * done // total if total else 100
    text = f"{done}/{total} rows ({percent}%)"
    if done and elapsed > 0:
        rate = done / elapsed
        eta = timedelta(seconds=round((total - done) / rate))
        text += f", {rate:,.0f} rows/s, ETA {eta}"
    else:
        text += ", - rows/s, ETA -"
    return text


class ImportProgress:
    """Rows done, rate and ETA on stderr: a live bar on a terminal, otherwise a line per batch (logs)."""

    def __init__(self, total: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.done = 0
        self.clock = clock
        self.started = clock()
        self.bar: Progress | None = None
        if sys.stderr.isatty():
            self.bar = Progress(
                TextColumn("importing"),
                BarColumn(),
                TextColumn("{task.description}"),
                console=Console(stderr=True),
                transient=True,
            )
            self.task = self.bar.add_task(self.text(), total=total)
            self.bar.start()

    def text(self) -> str:
        return progress_text(self.done, self.total, self.clock() - self.started)

    def advance(self, rows: int) -> None:
        if not rows:
            return
        self.done += rows
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done, description=self.text())
        else:
            typer.echo(f"imported {self.text()}", err=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


@contextmanager
def error_report(path: Path | None) -> Iterator[Callable[[RowProblem], None]]:
    """A CSV of the rows left out (line, value, reason), or nowhere."""
    if path is None:
        yield lambda problem: None
        return
    try:
        handle: TextIO = path.open("w", newline="", encoding="utf-8")
    except OSError as exc:
        raise fail(f"cannot write the errors report {path}: {exc.strerror}") from exc
    with handle:
        writer = csv.writer(handle)
        writer.writerow(["line", "value", "reason"])
        yield lambda problem: writer.writerow([problem.line, problem.value, problem.reason])


@contacts_cli.command("import")
def contacts_import(
    file: Annotated[Path, typer.Argument(help="CSV with an email column; first_name, last_name optional")],
    email: Annotated[str, typer.Option(help="The account owner's email")],
    list_id: Annotated[
        list[int] | None, typer.Option("--list", help="Add every contact to this list")
    ] = None,
    errors: Annotated[
        Path | None,
        typer.Option("--errors", help="Write the rows left out to this CSV (line, value, reason)"),
    ] = None,
    batch_size: Annotated[int, typer.Option(help="Rows a transaction", min=1)] = IMPORT_BATCH,
) -> None:
    """Import contacts from CSV in batches (an address already held is updated), with progress on stderr.

    At the account's contact limit the import stops at the first row that would pass it; the rows
    before it are in, so it can run again over the whole file once the limit is raised.
    """
    # The email API's modules load here, not when the command line starts (every command would pay).
    from app.mail.contact_import import (
        check_import_lists,
        count_csv_rows,
        import_batch,
        import_rows,
        read_csv_rows,
    )

    if not file.is_file():
        raise fail(f"no such file: {file}")
    settings = cli_settings()
    migrate(settings)
    lists = list(list_id or [])
    try:
        total = count_csv_rows(file)
    except DomainError as exc:
        raise fail(exc.message) from exc
    engine = create_db_engine(settings.database_url)
    factory = make_session_factory(engine)

    def in_transaction(work: Callable[[Session], T]) -> T:
        try:
            with transaction(factory) as session:
                return work(session)
        except DomainError as exc:
            raise fail(exc.message) from exc
        except SQLAlchemyError as exc:
            raise fail(f"database error: {exc.__class__.__name__}: {str(exc).splitlines()[0]}") from exc

    try:
        in_transaction(lambda session: check_import_lists(session, email, lists))
        with error_report(errors) as report:
            progress = ImportProgress(total)
            try:
                tally = import_rows(
                    read_csv_rows(file),
                    lists,
                    write_batch=lambda batch: in_transaction(
                        lambda session: import_batch(session, email, batch)
                    ),
                    report=report,
                    advance=progress.advance,
                    batch_size=batch_size,
                )
            finally:
                progress.close()
    except DomainError as exc:
        raise fail(exc.message) from exc
    finally:
        engine.dispose()
    summary = f"created {tally.created}, updated {tally.updated}, skipped {tally.skipped} invalid"
    if errors is not None and tally.skipped:
        summary += f" (listed in {errors})"
    stopped = tally.stopped
    if stopped is not None:
        raise fail(
            f"stopped at line {stopped.stopped_at} of {file}: the account's contact limit of "
            f"{stopped.contact_limit} is reached; {tally.written} rows went in before it ({summary}). "
            f"Raise the limit with `tidings users update {email} --contact-limit N` and run the "
            "import again (contacts already in are updated, not duplicated)."
        )
    typer.echo(summary)
