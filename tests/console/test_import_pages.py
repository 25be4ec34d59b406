"""The console's contact import in-process: a semicolon-separated CSV with an "Email Address" header
uploaded, its columns mapped (the email, a name, a new custom field), a list chosen, imported by the
command's own code, and the report with the rows left out and why (downloadable); the upload is read
with a cap; another account's upload is not found; a cross-site upload is refused."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.console.import_routes import MAX_UPLOAD_BYTES
from app.mail import import_uploads
from app.mail.list_service import make_list
from app.models import Contact
from tests.authroutes.conftest import SAME_ORIGIN, Person, sign_in

CSV = (
    "Email Address;Given Name;Town;Notes\n"
    "ann@example.com;Ann;Oslo;likes tea\n"
    "not-an-email;Bo;Rome;\n"
    "cy@example.com;Cy;;\n"
    ";Dee;Lima;\n"
)


def _upload(console: TestClient, data: str | bytes, name: str = "people.csv") -> str:
    made = console.post("/console/contacts/import", files={"file": (name, data, "text/csv")})
    assert made.status_code == 303, made.text
    return str(made.headers["location"])


def test_upload_map_import_and_report(console: TestClient, db: Session, person: Person) -> None:
    readers = make_list(db, person.account_id, person.user_id, "Readers")
    assert 'href="/console/contacts/import"' in console.get("/console/contacts").text
    assert 'enctype="multipart/form-data"' in console.get("/console/contacts/import").text
    mapping = _upload(console, CSV)
    page = console.get(mapping)
    assert page.status_code == 200 and "Import people.csv" in page.text
    # The separator guessed, and the headers read as the email and the first name.
    assert '<option value="semicolon" selected>' in page.text
    assert '<option value="email" selected>the email address' in page.text
    assert '<option value="first_name" selected>the first name' in page.text
    assert '<option value="field:town">a new custom field town' in page.text

    no_email = console.post(mapping, data={"delimiter": "semicolon", "column_0": "skip", "action": "import"})
    assert no_email.status_code == 422 and "the one column that holds the email address" in no_email.text
    done = console.post(
        mapping,
        data={
            "delimiter": "semicolon",
            "column_0": "email",
            "column_1": "first_name",
            "column_2": "field:town",
            "column_3": "skip",
            "lists": str(readers.id),
            "action": "import",
        },
    )
    assert done.status_code == 303, done.text
    # A file of one batch is imported at once: its progress page leads straight to the report.
    progress = console.get(done.headers["location"], follow_redirects=False)
    assert progress.status_code == 303
    report_path = progress.headers["location"]
    assert report_path.endswith("/report")
    report = console.get(report_path)
    assert report.status_code == 200
    assert '<dd id="import-created">2</dd>' in report.text and '<dd id="import-skipped">2</dd>' in report.text
    assert "<td>3</td><td>not-an-email</td>" in report.text and "no email" in report.text
    download = console.get(report_path + ".csv")
    assert download.headers["content-type"].startswith("text/csv")
    assert download.text.splitlines()[0] == "line,value,reason" and len(download.text.splitlines()) == 3

    db.expire_all()
    contacts = {
        c.email: c for c in db.scalars(select(Contact).where(Contact.account_id == person.account_id))
    }
    assert set(contacts) == {"ann@example.com", "cy@example.com"}
    assert contacts["ann@example.com"].first_name == "Ann"
    ann = console.get(f"/console/contacts/{contacts['ann@example.com'].id}").text
    assert "Oslo" in ann and "Readers" in ann
    # Importing again updates: nothing is created twice.
    again = _upload(console, CSV)
    redo = console.post(again, data={"delimiter": "semicolon", "column_0": "email", "action": "import"})
    assert (
        '<dd id="import-updated">2</dd>' in console.get(redo.headers["location"], follow_redirects=True).text
    )


def test_refusals(
    console: TestClient,
    person: Person,
    make_client: Callable[..., TestClient],
    make_person: Callable[..., Person],
) -> None:
    broken = _upload(console, b"email\n\xff\xfe@example.com\n")
    refused = console.post(broken, data={"delimiter": "comma", "column_0": "email", "action": "import"})
    assert refused.status_code == 400 and "is not UTF-8 text" in refused.text
    empty = console.post("/console/contacts/import", files={"file": ("", b"", "text/csv")})
    assert empty.status_code == 400 and "Choose a CSV file." in empty.text
    too_large = console.post(
        "/console/contacts/import", files={"file": ("big.csv", b"x" * (MAX_UPLOAD_BYTES + 1), "text/csv")}
    )
    assert too_large.status_code == 413
    assert console.get("/console/contacts/import/not-a-token").status_code == 404
    assert console.get(broken + "/report").status_code == 404  # not imported yet

    stranger = make_person("stranger")
    other = make_client()
    sign_in(other, stranger)
    other.headers.update(SAME_ORIGIN)
    assert other.get(broken).status_code == 404
    foreign = console.post(
        "/console/contacts/import",
        files={"file": ("x.csv", b"email\n", "text/csv")},
        headers={"Origin": "https://evil.example"},
    )
    assert foreign.status_code == 403


def test_the_progress_page_of_an_import_in_the_background(console: TestClient, person: Person) -> None:
    """What a larger file's page shows while it runs (the page's script looks at its status again), when
    it failed, and when it has not moved for a while; the import itself runs in a real server
    (test_browser.py)."""
    token = _upload(console, CSV).rsplit("/", 1)[1]
    page = f"/console/contacts/import/{token}/progress"
    assert console.get(page).status_code == 404  # not started
    import_uploads.save_progress(person.account_id, token, 2000, 5000)
    running = console.get(page)
    assert running.status_code == 200
    assert 'data-refresh="2"' in running.text
    assert '<span id="import-done">2000</span> of 5000' in running.text
    import_uploads.save_progress(person.account_id, token, 3000, 5000, failed="the database went away")
    failed = console.get(page).text
    assert (
        "stopped after 3000 of 5000 rows: the database went away" in failed and "data-refresh" not in failed
    )
    progress_file = import_uploads.UPLOADS / f"{person.account_id}-{token}.progress"
    import_uploads.save_progress(person.account_id, token, 4000, 5000)
    old = time.time() - import_uploads.STALLED_SECONDS - 1
    os.utime(progress_file, (old, old))
    stalled = console.get(page).text
    assert "has not moved for a while after 4000 of 5000 rows" in stalled and "data-refresh" not in stalled
