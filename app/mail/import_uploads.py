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
import re
import secrets
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from app.kit.errors import NotFound
from app.mail.contact_import import ImportTally, RowProblem

UPLOADS = Path(tempfile.gettempdir()) / "tidings-imports"
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
