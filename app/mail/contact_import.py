"""Importing contacts from a CSV file (`tidings contacts import`): reading and checking its rows, and
writing them in batches that stop at the account's contact limit on the exact row that would pass it."""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError
from sqlalchemy import String, select
from sqlalchemy.orm import Session

from app.db import among
from app.identity.accounts import user_by_email
from app.identity.principal import principal_of
from app.kit.errors import DomainError
from app.mail.common import live_list_ids_among
from app.mail.contact_service import ContactWrite, upsert_contacts
from app.mail.specs import BatchContact
from app.models import Account, Contact

# Rows written a transaction: the command's default and the console's.
IMPORT_BATCH = 1000

EMAIL_COLUMN = "email"
NAME_COLUMNS = ("first_name", "last_name")


@dataclass(frozen=True)
class CsvRow:
    """A record of the file: the line it starts on (the header is line 1) and its values by column."""

    line: int
    values: dict[str, str]


@dataclass(frozen=True)
class RowProblem:
    """A row left out: its line, the value at fault and why."""

    line: int
    value: str
    reason: str


@dataclass(frozen=True)
class ColumnMap:
    """Which column of the file (its header name, trimmed and lowercase) fills what: the email, the
    names, and custom fields (column, field name). The command's file names its columns `email`,
    `first_name` and `last_name`; the console's import page lets the person map any header."""

    email: str = EMAIL_COLUMN
    first_name: str | None = NAME_COLUMNS[0]
    last_name: str | None = NAME_COLUMNS[1]
    fields: tuple[tuple[str, str], ...] = ()

    @property
    def imported(self) -> set[str]:
        """The columns whose values become an email or a name (which hold no line break)."""
        return {name for name in (self.email, self.first_name, self.last_name) if name}


FILE_COLUMNS = ColumnMap()
# The delimiters a file may use, by the name a form sends.
DELIMITERS = {"comma": ",", "semicolon": ";", "tab": "\t", "bar": "|"}


def read_csv_rows(
    path: Path, columns: ColumnMap = FILE_COLUMNS, delimiter: str = ",", name: str | None = None
) -> Iterator[CsvRow]:
    """The file's records, blank lines skipped; column names compare trimmed and lowercase. `name` is
    how the messages call the file (its path otherwise).

    DomainError(400) when the header has no email column, the file is not UTF-8 or not CSV, or a quote
    is not closed where it should be. The CSV is read strictly: a quote left open to the end of the file,
    or text after a closing quote, is an error naming the line where the quoted field opened, never a
    field that silently swallows the rows after it. A quoted field of another column may hold line breaks
    (a postal address, a note); one of the columns imported (email, names) may not, as no contact's
    does: there a line break means a quote opened by mistake.
    """
    label = name or str(path)
    end = 0  # the last line of the record read last
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle, strict=True, delimiter=delimiter)
            header = next(reader, None)
            names = [column.strip().lower() for column in header or []]
            if columns.email not in names:
                raise DomainError(400, f"{label} has no '{columns.email}' column in its header")
            end = reader.line_num
            for record in reader:
                start, end = end + 1, reader.line_num
                if not record:
                    continue
                if end > start:
                    refuse_line_breaks(label, columns.imported, names, record, start, end)
                values = {column: value.strip() for column, value in zip(names, record, strict=False)}
                yield CsvRow(start, values)
    except UnicodeDecodeError as exc:
        raise DomainError(400, f"{label} is not UTF-8 text: {exc.reason} at byte {exc.start}") from exc
    except csv.Error as exc:
        raise DomainError(400, csv_error_message(label, exc, end + 1)) from exc


def csv_header(path: Path, delimiter: str) -> list[str]:
    """The file's column names as written (for the mapping page; bytes that are not UTF-8 shown as
    U+FFFD, the import itself refuses them); [] when its first line is not CSV."""
    try:
        with path.open(newline="", encoding="utf-8-sig", errors="replace") as handle:
            header = next(csv.reader(handle, delimiter=delimiter), [])
    except csv.Error:
        return []
    return [column.strip() for column in header]


def guess_delimiter(path: Path) -> str:
    """The name of the delimiter the file's first line holds most of (a comma when none)."""
    with path.open(encoding="utf-8-sig", errors="replace") as handle:
        first = handle.readline()
    counts = {name: first.count(character) for name, character in DELIMITERS.items()}
    best = max(counts, key=lambda name: counts[name])
    return best if counts[best] else "comma"


QUOTE_ADVICE = 'close the quote, or write a quote inside a quoted field twice ("Ada ""the"" Lovelace")'


def csv_error_message(path: str, exc: csv.Error, start: int) -> str:
    """The csv module's complaint, said as where the record (and so the open quote) starts."""
    if "unexpected end of data" in str(exc):
        return (
            f"{path}: the quote opened on line {start} is never closed (it runs to the end of the file); "
            f"nothing was imported: {QUOTE_ADVICE}"
        )
    return f"{path} is not valid CSV in the record starting on line {start} ({exc}); {QUOTE_ADVICE}"


def refuse_line_breaks(
    path: str, imported: set[str], columns: list[str], record: list[str], start: int, end: int
) -> None:
    """DomainError(400) when an imported column of a record that spans lines start..end holds a line
    break: the quote that opened it, on the line named, was not closed where the field should end."""
    line = start
    for name, value in zip(columns, record, strict=False):
        if name in imported and ("\n" in value or "\r" in value):
            raise DomainError(
                400,
                f"{path}: the {name} field quoted on line {line} runs over {end - line + 1} lines "
                f"(to line {end}), so its quote is not closed where it should be; an email or a name "
                f"holds no line break. Nothing was imported: {QUOTE_ADVICE}",
            )
        line += value.count("\n") or value.count("\r")


def count_csv_rows(
    path: Path, columns: ColumnMap = FILE_COLUMNS, delimiter: str = ",", name: str | None = None
) -> int:
    """One pass over the file, reading it as the import will: its errors show before anything is written."""
    return sum(1 for _ in read_csv_rows(path, columns, delimiter, name))


def contact_write(
    row: CsvRow, list_ids: list[int], columns: ColumnMap = FILE_COLUMNS
) -> ContactWrite | RowProblem:
    """The row as a contact write, under the API's rules for a contact (its custom fields' too); or
    why it cannot be one. An empty cell of a custom field leaves the contact's value as it is."""
    email = row.values.get(columns.email, "")
    if not email:
        return RowProblem(row.line, "", "no email")
    column_of = {
        EMAIL_COLUMN: columns.email,
        "first_name": columns.first_name,
        "last_name": columns.last_name,
    }
    names = {target: row.values.get(column_of[target] or "") or None for target in NAME_COLUMNS}
    given = [(column, field) for column, field in columns.fields if row.values.get(column)]
    custom = [{"name": field, "value": row.values[column]} for column, field in given]
    try:
        contact = BatchContact.model_validate({EMAIL_COLUMN: email, **names, "contact_fields": custom})
    except ValidationError as exc:
        error = exc.errors()[0]
        field = str(error["loc"][0]) if error["loc"] else EMAIL_COLUMN
        if field == "contact_fields" and len(error["loc"]) > 1:
            column, name = given[int(error["loc"][1])]
            return RowProblem(row.line, row.values.get(column, ""), f"{name}: {error['msg']}")
        column = {
            EMAIL_COLUMN: columns.email,
            **dict(zip(NAME_COLUMNS, (columns.first_name, columns.last_name), strict=True)),
        }.get(field) or field
        return RowProblem(row.line, str(row.values.get(column) or ""), f"{field}: {error['msg']}")
    return ContactWrite(
        email=contact.email,
        first_name=contact.first_name,
        last_name=contact.last_name,
        lists=list(list_ids),
        fields={item.name: item.value for item in contact.contact_fields},
    )


def check_import_lists(session: Session, owner_email: str, list_ids: list[int]) -> None:
    """Every list id names a live list of the owner's account (checked once, before any row)."""
    account_id = user_by_email(session, owner_email).account_id
    found = live_list_ids_among(session, account_id, list_ids)
    missing = [str(list_id) for list_id in dict.fromkeys(list_ids) if list_id not in found]
    if missing:
        raise DomainError(404, f"No list with the id {', '.join(missing)} in the account of {owner_email}.")


def rows_within_limit(session: Session, account_id: int, writes: list[ContactWrite]) -> int:
    """How many of `writes`, in order, fit under the contact limit: a new address (or a deleted contact
    coming back) takes a place, an address already held or earlier in the batch does not.

    Locks the account row, as upsert_contacts does, so the answer holds until the transaction ends."""
    count, limit = session.execute(
        select(Account.contacts_count, Account.contact_limit)
        .where(Account.id == account_id)
        .with_for_update()
    ).one()
    keys = list(dict.fromkeys(write.email.lower() for write in writes))
    held = set(
        session.scalars(
            select(Contact.email_key).where(
                Contact.account_id == account_id,
                Contact.deleted_at.is_(None),
                among(session, Contact.email_key, keys, String()),
            )
        )
    )
    room = limit - count
    for index, write in enumerate(writes):
        key = write.email.lower()
        if key in held:
            continue
        if room <= 0:
            return index
        room -= 1
        held.add(key)
    return len(writes)


@dataclass(frozen=True)
class BatchOutcome:
    created: int
    updated: int
    # Rows written (an address twice in the file is two rows); the rest of the batch stopped at `stopped_at`.
    written: int
    # The line of the first row that would have passed the contact limit, if one did.
    stopped_at: int | None
    contact_limit: int


def import_batch(session: Session, owner_email: str, rows: list[tuple[int, ContactWrite]]) -> BatchOutcome:
    """Upsert the rows (line, write) of one batch into the owner's account, as far as the contact limit
    allows: the rows before the first that would pass it go in, in this transaction."""
    user = user_by_email(session, owner_email)
    account = session.get_one(Account, user.account_id)
    fits = rows_within_limit(session, account.id, [write for _, write in rows])
    taken = [write for _, write in rows[:fits]]
    result = upsert_contacts(session, principal_of(user, account), taken, validation_status=400)
    return BatchOutcome(
        created=result.created,
        updated=result.updated,
        written=len(taken),
        stopped_at=rows[fits][0] if fits < len(rows) else None,
        contact_limit=account.contact_limit,
    )


@dataclass
class ImportTally:
    """What an import did: rows created, updated, written and left out, and where it stopped."""

    created: int = 0
    updated: int = 0
    written: int = 0
    skipped: int = 0
    # The batch that reached the contact limit, if one did.
    stopped: BatchOutcome | None = None


def import_rows(
    rows: Iterable[CsvRow],
    list_ids: list[int],
    *,
    write_batch: Callable[[list[tuple[int, ContactWrite]]], BatchOutcome],
    report: Callable[[RowProblem], None],
    advance: Callable[[int], None],
    batch_size: int,
    columns: ColumnMap = FILE_COLUMNS,
) -> ImportTally:
    """The rows written in batches of `batch_size` by `write_batch` (the caller's transaction for each),
    each row left out told to `report`, the rows done told to `advance`; it stops at the batch that
    reaches the contact limit, and the rows after that stop are neither counted nor reported."""
    tally = ImportTally()
    batch: list[tuple[int, ContactWrite]] = []
    read: list[int] = []  # the lines of the rows read since the last batch
    problems: list[RowProblem] = []  # and those of them left out

    def flush() -> BatchOutcome | None:
        """Write the batch; the outcome when it stopped at the contact limit."""
        nonlocal read, batch, problems
        outcome = None
        if batch:
            outcome = write_batch(batch)
            tally.created += outcome.created
            tally.updated += outcome.updated
            tally.written += outcome.written
        stop = outcome.stopped_at if outcome is not None else None
        for problem in problems:
            if stop is None or problem.line < stop:
                tally.skipped += 1
                report(problem)
        advance(len([line for line in read if stop is None or line < stop]))
        read, batch, problems = [], [], []
        return outcome if outcome is not None and outcome.stopped_at is not None else None

    for row in rows:
        read.append(row.line)
        write = contact_write(row, list_ids, columns)
        if isinstance(write, RowProblem):
            problems.append(write)
        else:
            batch.append((row.line, write))
        if len(batch) == batch_size:
            tally.stopped = flush()
            if tally.stopped is not None:
                return tally
    tally.stopped = flush()
    return tally
