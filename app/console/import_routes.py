"""The console's contact import: upload a CSV (read with a cap), map its columns (the email, the names,
custom fields; the delimiter), choose lists, import, and read the report (created, updated, the rows
left out with why, as a CSV to download). The import is `tidings contacts import`'s own code
(app/mail/contact_import.py: the same reading, rules, batches and contact-limit stop)."""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from app.console.pages import CONSOLE, PAGE_HEADERS, ConsoleUser, PostedForm, messages_of
from app.identity.origin_guard import check_cookie_origin
from app.kit.body import BodyTooLarge, read_capped
from app.kit.errors import DomainError
from app.mail import import_uploads
from app.mail.contact_import import (
    DELIMITERS,
    IMPORT_BATCH,
    ColumnMap,
    check_import_lists,
    count_csv_rows,
    csv_header,
    guess_delimiter,
)
from app.mail.field_service import counted_fields
from app.mail.list_service import account_lists

router = APIRouter(include_in_schema=False, dependencies=[Depends(check_cookie_origin)])
IMPORT = CONSOLE + "/contacts/import"
# A CSV of 100,000 contacts with a few fields is about 10 MB.
MAX_UPLOAD_BYTES = 20 * 1024 * 1024
PROGRESS_REFRESH_SECONDS = 2
PROBLEMS_SHOWN = 100
# Header names read as the email and the names (compared lowercase, without spaces, dashes, underscores).
GUESSES = {
    "email": ("email", "emailaddress", "e-mail", "mail", "emailaddr"),
    "first_name": ("firstname", "first", "givenname", "forename", "name"),
    "last_name": ("lastname", "last", "surname", "familyname"),
}


def _squashed(header: str) -> str:
    return re.sub(r"[\s_\-]+", "", header.lower())


def _guess(header: str) -> str:
    squashed = _squashed(header)
    for target, names in GUESSES.items():
        if squashed in {_squashed(name) for name in names}:
            return target
    return "skip"


def _field_name(header: str) -> str:
    """A new custom field named after its column: lowercase, words joined by underscores."""
    return re.sub(r"\W+", "_", header.strip().lower()).strip("_")[:191] or "field"


def _mapping_page(
    me: ConsoleUser, token: str, delimiter: str, chosen: dict[int, str] | None = None, **context: Any
) -> Response:
    path = import_uploads.upload_path(me.account_id, token)
    header = csv_header(path, DELIMITERS[delimiter])
    guessed = {index: _guess(name) for index, name in enumerate(header)}
    # One column for each of the email and the names: the first that looks like it.
    seen: set[str] = set()
    for index, target in guessed.items():
        if target in seen:
            guessed[index] = "skip"
        seen.add(target)
    return me.page(
        "contacts/import_map.html",
        section="contacts",
        token=token,
        file_name=import_uploads.upload_name(me.account_id, token),
        header=header,
        choices={**guessed, **(chosen or {})},
        new_fields={index: _field_name(name) for index, name in enumerate(header)},
        fields=[field.name for field in counted_fields(me.db, me.account_id)],
        delimiters=DELIMITERS,
        delimiter=delimiter,
        lists=account_lists(me.db, me.account_id),
        **{"errors": [], "chosen_lists": [], **context},
    )


@router.get(IMPORT)
def upload_page(me: ConsoleUser) -> Response:
    return me.page("contacts/import.html", section="contacts", max_mb=MAX_UPLOAD_BYTES // (1024 * 1024))


@router.post(IMPORT)
async def upload_submit(request: Request, me: ConsoleUser) -> Response:
    """The file, read with a cap (413 past it, whatever its Content-Length says), kept for the next step."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "multipart/form-data":
        raise DomainError(415, "The file is sent as multipart/form-data.")
    try:
        await read_capped(request, MAX_UPLOAD_BYTES)
    except BodyTooLarge as exc:
        raise DomainError(413, f"The file is larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MB.") from exc
    form = await request.form(max_files=1, max_fields=10)
    upload = form.get("file")
    if not isinstance(upload, UploadFile) or not upload.filename:
        page = me.page(
            "contacts/import.html",
            section="contacts",
            status=400,
            max_mb=MAX_UPLOAD_BYTES // (1024 * 1024),
            errors=["Choose a CSV file."],
        )
        return page
    data = await upload.read()
    token = await run_in_threadpool(import_uploads.store_upload, me.account_id, data, upload.filename)
    return me.redirect(f"{IMPORT}/{token}")


@router.get(IMPORT + "/{token}")
def mapping_page(token: str, me: ConsoleUser, delimiter: str = "") -> Response:
    path = import_uploads.upload_path(me.account_id, token)
    return _mapping_page(me, token, delimiter if delimiter in DELIMITERS else guess_delimiter(path))


def _columns(header: list[str], form: PostedForm) -> tuple[ColumnMap, dict[int, str]]:
    """The mapping chosen: one column for the email (422 otherwise), at most one for each name."""
    chosen = {index: form.text(f"column_{index}") or "skip" for index in range(len(header))}
    by_target: dict[str, list[int]] = {}
    fields: list[tuple[str, str]] = []
    for index, target in chosen.items():
        if target.startswith("field:"):
            fields.append((header[index].strip().lower(), target.removeprefix("field:")))
        elif target != "skip":
            by_target.setdefault(target, []).append(index)
    problems = []
    if len(by_target.get("email", [])) != 1:
        problems.append("Choose the one column that holds the email address.")
    for target, label in (("first_name", "first name"), ("last_name", "last name")):
        if len(by_target.get(target, [])) > 1:
            problems.append(f"Choose one column at most for the {label}.")
    if problems:
        raise DomainError(422, " ".join(problems))

    def column(target: str) -> str | None:
        return header[by_target[target][0]].strip().lower() if target in by_target else None

    email = column("email") or ""
    return ColumnMap(email, column("first_name"), column("last_name"), tuple(fields)), chosen


@router.post(IMPORT + "/{token}")
def import_submit(token: str, me: ConsoleUser, form: PostedForm) -> Response:
    """Checks the whole file first (as the command does: nothing is written when it cannot be read),
    then imports it: a file of one batch at once, a larger one in the background, a transaction a batch
    as the command does; the progress page shows how far it got, then the report."""
    path = import_uploads.upload_path(me.account_id, token)
    delimiter = form.text("delimiter") if form.text("delimiter") in DELIMITERS else "comma"
    if form.text("action") == "reread":
        return me.redirect(f"{IMPORT}/{token}?delimiter={delimiter}")
    header = csv_header(path, DELIMITERS[delimiter])
    file_name = import_uploads.upload_name(me.account_id, token)
    chosen: dict[int, str] = {}
    lists = form.all("lists")
    try:
        columns, chosen = _columns(header, form)
        list_ids = [int(value) for value in lists if value.isdigit()]
        check_import_lists(me.db, me.user.email, list_ids)
        rows = count_csv_rows(path, columns, DELIMITERS[delimiter], file_name)
    except DomainError as refused:
        return _mapping_page(
            me,
            token,
            delimiter,
            chosen,
            errors=messages_of(refused),
            chosen_lists=lists,
            status=refused.status,
        )
    job = import_uploads.ImportJob(
        me.account_id,
        me.user.email,
        token,
        path,
        columns,
        DELIMITERS[delimiter],
        file_name,
        list_ids,
        rows,
    )
    if rows <= IMPORT_BATCH:
        job.run_in(me.db)
    else:
        job.start_in_background(me.db)
    return me.redirect(f"{IMPORT}/{token}/progress")


@router.get(IMPORT + "/{token}/progress")
def progress_page(token: str, me: ConsoleUser) -> Response:
    """Rows done of the file while it runs (the page reloads itself, no script needed), then the
    report."""
    if import_uploads.is_reported(me.account_id, token):
        return me.redirect(f"{IMPORT}/{token}/report")
    progress = import_uploads.read_progress(me.account_id, token)
    return me.page(
        "contacts/import_progress.html",
        section="contacts",
        token=token,
        progress=progress,
        file_name=import_uploads.upload_name(me.account_id, token),
        refresh_seconds=PROGRESS_REFRESH_SECONDS,
    )


@router.get(IMPORT + "/{token}/report")
def report_page(token: str, me: ConsoleUser) -> Response:
    summary, report_path = import_uploads.read_report(me.account_id, token)
    return me.page(
        "contacts/import_report.html",
        section="contacts",
        token=token,
        summary=summary,
        problems=import_uploads.first_problems(report_path, PROBLEMS_SHOWN),
        shown=PROBLEMS_SHOWN,
    )


@router.get(IMPORT + "/{token}/report.csv")
def report_download(token: str, me: ConsoleUser) -> Response:
    _summary, report_path = import_uploads.read_report(me.account_id, token)
    return Response(
        report_path.read_bytes(),
        media_type="text/csv; charset=utf-8",
        headers={**PAGE_HEADERS, "Content-Disposition": 'attachment; filename="import-report.csv"'},
    )
