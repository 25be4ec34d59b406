"""The console's Lists and Fields in-process: create, rename and delete with a confirmation page that
gives the counts, through the email API's list and field services and their name rules; a list a form
uses is refused; another account's list is not found."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.identity.principal import principal_of
from app.mail import contact_service, form_service
from app.models import Account, ContactField, ContactList, User
from tests.authroutes.conftest import Person


def _lists(db: Session, account_id: int) -> dict[str, ContactList]:
    db.expire_all()
    rows = db.scalars(select(ContactList).where(ContactList.account_id == account_id))
    return {row.name: row for row in rows if row.deleted_at is None}


def test_create_rename_and_delete_a_list(
    console: TestClient, db: Session, person: Person, make_person: Callable[..., Person]
) -> None:
    assert "You have no lists." in console.get("/console/lists").text
    refused = console.post("/console/lists", data={"name": "x" * 192})
    assert refused.status_code == 422 and "name: The name field must not be greater than 191" in refused.text
    assert console.post("/console/lists", data={"name": "Readers"}).status_code == 303
    assert console.post("/console/lists", data={"name": "Used"}).status_code == 303
    readers, used = _lists(db, person.account_id)["Readers"], _lists(db, person.account_id)["Used"]
    principal = principal_of(db.get_one(User, person.user_id), db.get_one(Account, person.account_id))
    write = contact_service.ContactWrite("ann@example.com", lists=[readers.id])
    contact_service.upsert_contacts(db, principal, [write], validation_status=422)
    form_service.create_form(db, person.account_id, "Signup", [used.id])

    page = console.get("/console/lists")
    assert page.status_code == 200 and 'href="/console/contacts?list=' in page.text
    assert (
        console.post(f"/console/lists/{readers.id}/rename", data={"name": "Subscribers"}).status_code == 303
    )
    db.refresh(readers)
    assert readers.name == "Subscribers"

    confirm = console.get(f"/console/lists/{readers.id}/delete")
    assert "Delete the list Subscribers?" in confirm.text and "Its 1 contacts stay" in confirm.text
    in_use = console.get(f"/console/lists/{used.id}/delete")
    assert "the form Signup" in in_use.text
    assert f'action="/console/lists/{used.id}/delete"' not in in_use.text
    refused_delete = console.post(f"/console/lists/{used.id}/delete")
    assert (
        refused_delete.status_code == 409
        and "The list is in use and cannot be deleted." in refused_delete.text
    )
    assert console.post(f"/console/lists/{readers.id}/delete").status_code == 303
    assert list(_lists(db, person.account_id)) == ["Used"]

    stranger = make_person("stranger")
    theirs = ContactList(account_id=stranger.account_id, user_id=stranger.user_id, name="Theirs")
    db.add(theirs)
    db.flush()
    assert console.get(f"/console/lists/{theirs.id}/delete").status_code == 404
    assert console.post(f"/console/lists/{theirs.id}/rename", data={"name": "Mine"}).status_code == 404


def test_create_rename_and_delete_a_field(console: TestClient, db: Session, person: Person) -> None:
    principal = principal_of(db.get_one(User, person.user_id), db.get_one(Account, person.account_id))
    writes = [
        contact_service.ContactWrite("ann@example.com", fields={"city": "Oslo"}),
        contact_service.ContactWrite("bo@example.com", fields={"city": "Rome", "plan": "gold"}),
    ]
    contact_service.upsert_contacts(db, principal, writes, validation_status=422)
    page = console.get("/console/fields")
    assert page.status_code == 200 and "<td>city</td><td>2</td>" in page.text
    assert console.post("/console/fields", data={"name": "team"}).status_code == 303
    taken = console.post("/console/fields", data={"name": "city"})
    assert taken.status_code == 409 and "A field named city already exists." in taken.text
    assert console.post("/console/fields", data={"name": ""}).status_code == 422

    fields = {
        f.name: f
        for f in db.scalars(select(ContactField).where(ContactField.account_id == person.account_id))
    }
    assert set(fields) == {"city", "plan", "team"}
    clash = console.post(f"/console/fields/{fields['plan'].id}/rename", data={"name": "city"})
    assert clash.status_code == 409
    assert (
        console.post(f"/console/fields/{fields['plan'].id}/rename", data={"name": "tier"}).status_code == 303
    )
    confirm = console.get(f"/console/fields/{fields['city'].id}/delete")
    assert "Delete the field city?" in confirm.text and "The 2 contacts holding a value" in confirm.text
    assert console.post(f"/console/fields/{fields['city'].id}/delete").status_code == 303
    after = console.get("/console/fields").text
    assert "<td>tier</td><td>1</td>" in after and "<td>city</td>" not in after
