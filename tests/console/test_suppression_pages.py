"""The console's Suppressions in-process: addresses added through the email API's service (its
validation, its "already listed"), each shown with its reason, searched, removed (a hard-bounced contact
becomes sendable again); another account's list is not shown."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.identity.principal import principal_of
from app.kit.time import utcnow
from app.mail import contact_service
from app.mail.suppression_service import suppress_contacts
from app.models import Account, Contact, User
from tests.authroutes.conftest import Person


def test_add_search_and_remove_suppressions(
    console: TestClient, db: Session, person: Person, make_person: Callable[..., Person]
) -> None:
    principal = principal_of(db.get_one(User, person.user_id), db.get_one(Account, person.account_id))
    write = contact_service.ContactWrite("Bounced@Example.com")
    bounced_id = contact_service.upsert_contacts(db, principal, [write], validation_status=422).ids_by_key[
        "bounced@example.com"
    ]
    db.get_one(Contact, bounced_id).bounced_at = utcnow()
    suppress_contacts(db, [bounced_id], "bounce", utcnow())
    db.flush()

    refused = console.post("/console/suppressions", data={"emails": "ok@example.com\nnot-an-address"})
    assert refused.status_code == 422 and "emails.1:" in refused.text and "not-an-address" in refused.text
    added = console.post(
        "/console/suppressions", data={"emails": "a@example.com, B@example.com\nbounced@example.com"}
    )
    assert added.status_code == 303
    page = console.get(added.headers["location"])
    assert "Done: added 2, already listed 1." in page.text
    assert "3 addresses." in page.text
    assert "<td>Bounced@Example.com</td><td>a hard bounce</td>" in page.text
    assert "<td>B@example.com</td><td>added in the console</td>" in page.text
    found = console.get("/console/suppressions?q=b@EX").text
    assert "1 address." in found and "B@example.com" in found
    assert "0 addresses." in console.get("/console/suppressions?q=%25").text

    assert (
        console.post("/console/suppressions/remove", data={"email": "BOUNCED@example.com"}).status_code == 303
    )
    contact = db.get_one(Contact, bounced_id)
    db.refresh(contact)
    assert contact.bounced_at is None
    missing = console.post("/console/suppressions/remove", data={"email": "nobody@example.com"})
    assert missing.status_code == 404 and "Suppression not found." in missing.text

    stranger = make_person("stranger")
    other = principal_of(db.get_one(User, stranger.user_id), db.get_one(Account, stranger.account_id))
    theirs = contact_service.upsert_contacts(
        db, other, [contact_service.ContactWrite("theirs@example.com")], validation_status=422
    ).ids_by_key["theirs@example.com"]
    suppress_contacts(db, [theirs], "complaint", utcnow())
    db.flush()
    assert "theirs@example.com" not in console.get("/console/suppressions").text
    assert (
        console.post("/console/suppressions/remove", data={"email": "theirs@example.com"}).status_code == 404
    )
