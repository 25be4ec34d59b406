"""The CSV files uploaded on the console's import page, kept between its steps (upload, map the columns,
import, read the report) as files of the server's temporary directory, one per upload and account.

A database row would hold a file of megabytes for minutes; the temporary directory is shared by every
`tidings serve` process of one machine, which is where the steps' requests land. Each upload is named
by a random token and its account, readable only by the service's user, and deleted with its report a
day later (looked for on each new upload).
"""

from __future__ import annotations

import csv
import json
import logging
import os
import re
import secrets
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from app.db import make_write_session_factory, transaction
from app.kit.errors import DomainError, NotFound
from app.mail.contact_import import (
    IMPORT_BATCH,
    BatchOutcome,
    ColumnMap,
    ImportTally,
    RowProblem,
    import_batch,
    import_rows,
    read_csv_rows,
)
from app.mail.contact_service import ContactWrite

log = logging.getLogger("tidings.import")
UPLOADS = Path(tempfile.gettempdir()) / "tidings-imports"
# An import whose progress has not moved for this long is taken for stopped (its process ended): batches
# of a thousand rows take a second or two.
STALLED_SECONDS = 120
KEPT_SECONDS = 86_400
TOKEN = re.compile(r"[A-Za-z0-9_-]{22}")


@dataclass(frozen=True)
class ImportSummary:
    """What the report page shows of an import that ran."""

    file_name: str
    rows: int
    created: int
    updated: int
    written: int
    skipped: int
    stopped_at: int | None
    contact_limit: int | None


def _path(account_id: int, token: str, suffix: str, directory: Path) -> Path:
    if not TOKEN.fullmatch(token):
        raise NotFound("No such upload.")
    return directory / f"{account_id}-{token}{suffix}"


def store_upload(account_id: int, data: bytes, file_name: str, directory: Path = UPLOADS) -> str:
    """Keeps the file and the name it had; the token that names it."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    cutoff = time.time() - KEPT_SECONDS
    for old in directory.iterdir():
        try:
            if old.stat().st_mtime < cutoff:
                old.unlink()
        except FileNotFoundError:  # another process cleaned it first
            continue
    token = secrets.token_urlsafe(16)
    path = _path(account_id, token, ".csv", directory)
    path.touch(mode=0o600)
    path.write_bytes(data)
    _path(account_id, token, ".name", directory).write_text(file_name[:200], encoding="utf-8")
    return token


def upload_name(account_id: int, token: str, directory: Path = UPLOADS) -> str:
    """The name the uploaded file had on the person's computer."""
    try:
        return _path(account_id, token, ".name", directory).read_text(encoding="utf-8")
    except FileNotFoundError:
        return "the file"


def upload_path(account_id: int, token: str, directory: Path = UPLOADS) -> Path:
    """The account's upload (404 when it is not there: another account's, or cleaned away)."""
    path = _path(account_id, token, ".csv", directory)
    if not path.is_file():
        raise NotFound("No such upload: it may be more than a day old. Upload the file again.")
    return path


def save_report(
    account_id: int,
    token: str,
    summary: ImportSummary,
    problems: list[RowProblem],
    directory: Path = UPLOADS,
) -> None:
    """The import's counts, and the rows left out as a CSV (line, value, reason) as the command writes."""
    with _path(account_id, token, ".report.csv", directory).open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["line", "value", "reason"])
        writer.writerows([problem.line, problem.value, problem.reason] for problem in problems)
    _path(account_id, token, ".json", directory).write_text(json.dumps(asdict(summary)), encoding="utf-8")


def summary_of(tally: ImportTally, file_name: str, rows: int) -> ImportSummary:
    stopped = tally.stopped
    return ImportSummary(
        file_name=file_name,
        rows=rows,
        created=tally.created,
        updated=tally.updated,
        written=tally.written,
        skipped=tally.skipped,
        stopped_at=stopped.stopped_at if stopped else None,
        contact_limit=stopped.contact_limit if stopped else None,
    )


def first_problems(report: Path, limit: int) -> list[list[str]]:
    """The first `limit` rows left out (line, value, reason), from the report's CSV."""
    with report.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        next(reader, None)
        return [row for _, row in zip(range(limit), reader, strict=False)]


def read_report(account_id: int, token: str, directory: Path = UPLOADS) -> tuple[ImportSummary, Path]:
    """The summary of the import and the path of its CSV of rows left out (404 before it ran)."""
    summary_path = _path(account_id, token, ".json", directory)
    if not summary_path.is_file():
        raise NotFound("This upload has not been imported.")
    data: dict[str, Any] = json.loads(summary_path.read_text(encoding="utf-8"))
    return ImportSummary(**data), _path(account_id, token, ".report.csv", directory)


@dataclass(frozen=True)
class ImportProgress:
    """How far an import running in the background has got (the progress page reads it)."""

    done: int
    total: int
    failed: str | None = None
    stalled: bool = False


def save_progress(
    account_id: int, token: str, done: int, total: int, failed: str | None = None, directory: Path = UPLOADS
) -> None:
    """Replaced whole (written beside, then renamed), so a reader in another process never sees half."""
    path = _path(account_id, token, ".progress", directory)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps({"done": done, "total": total, "failed": failed}), encoding="utf-8")
    os.replace(partial, path)


def read_progress(account_id: int, token: str, directory: Path = UPLOADS) -> ImportProgress:
    """The import's progress (404 when none was started for this upload)."""
    path = _path(account_id, token, ".progress", directory)
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        moved = path.stat().st_mtime
    except FileNotFoundError:
        raise NotFound("This upload has not been imported.") from None
    return ImportProgress(
        data["done"], data["total"], data.get("failed"), stalled=time.time() - moved > STALLED_SECONDS
    )


def is_reported(account_id: int, token: str, directory: Path = UPLOADS) -> bool:
    """Whether the import of this upload has ended and its report is written."""
    return _path(account_id, token, ".json", directory).is_file()


@dataclass(frozen=True)
class ImportJob:
    """One import of an upload: `tidings contacts import`'s batches and contact-limit stop, then the
    report. A file of one batch runs in the request's transaction; a larger one in the background."""

    account_id: int
    owner_email: str
    token: str
    path: Path
    columns: ColumnMap
    delimiter: str
    file_name: str
    list_ids: list[int]
    rows: int

    def run_in(self, session: Session) -> None:
        """At once, in this (the request's) transaction; its errors are the request's."""
        self._run(lambda batch: import_batch(session, self.owner_email, batch), lambda done: None)

    def start_in_background(self, session: Session) -> None:
        """In a thread of this process, a transaction a batch on the request's database, its progress
        saved after each (in files every process of the machine reads); its transactions wait for the
        request's to end. A failure is saved as the progress's end, never lost in the thread."""
        factory = make_write_session_factory(session.get_bind().engine)
        save_progress(self.account_id, self.token, 0, self.rows)

        def write_batch(batch: list[tuple[int, ContactWrite]]) -> BatchOutcome:
            with transaction(factory) as own:
                return import_batch(own, self.owner_email, batch)

        def run() -> None:
            done = 0

            def advance(rows: int) -> None:
                nonlocal done
                done += rows
                save_progress(self.account_id, self.token, done, self.rows)

            try:
                self._run(write_batch, advance)
            except Exception as exc:
                log.exception("the console's import %s failed", self.token[:8])
                reason = exc.message if isinstance(exc, DomainError) else "an error on the server"
                save_progress(self.account_id, self.token, done, self.rows, failed=reason)

        threading.Thread(target=run, name=f"import-{self.token[:8]}", daemon=True).start()

    def _run(
        self,
        write_batch: Callable[[list[tuple[int, ContactWrite]]], BatchOutcome],
        advance: Callable[[int], None],
    ) -> None:
        problems: list[RowProblem] = []
        tally = import_rows(
            read_csv_rows(self.path, self.columns, self.delimiter, self.file_name),
            self.list_ids,
            write_batch=write_batch,
            report=problems.append,
            advance=advance,
            batch_size=IMPORT_BATCH,
            columns=self.columns,
        )
        save_report(self.account_id, self.token, summary_of(tally, self.file_name, self.rows), problems)
