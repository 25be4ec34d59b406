"""The console's Contacts in-process: search and filters over the email API's listing, the bulk actions
and a contact's page through the contact and list services, the filtered set as CSV, another account's
contact not found."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.identity.principal import principal_of
from app.kit.time import utcnow
from app.mail import contact_service, list_service
from app.models import Account, Contact, ListMembership, User
from tests.authroutes.conftest import Person


def _audience(db: Session, person: Person) -> tuple[dict[str, int], int, int]:
    """Three contacts (one bounced, one unsubscribed), two lists; the first contact on the first list."""
    principal = principal_of(db.get_one(User, person.user_id), db.get_one(Account, person.account_id))
    news = list_service.add_list(db, person.account_id, person.user_id, "News").id
    other = list_service.add_list(db, person.account_id, person.user_id, "Other").id
    writes = [
        contact_service.ContactWrite(
            "ada@example.com", "Ada", "Lovelace", lists=[news], fields={"city": "London"}
        ),
        contact_service.ContactWrite("=bob@example.com", "Bob"),
        contact_service.ContactWrite("cy@example.com", "Cy"),
    ]
    ids = contact_service.upsert_contacts(db, principal, writes, validation_status=422).ids_by_key
    db.get_one(Contact, ids["cy@example.com"]).bounced_at = utcnow()
    contact_service.unsubscribe_contacts(db, [ids["=bob@example.com"]], utcnow())
    db.flush()
    return ids, news, other


def test_search_filter_export_and_bulk_actions(console: TestClient, db: Session, person: Person) -> None:
    ids, news, other = _audience(db, person)
    page = console.get("/console/contacts")
    assert page.status_code == 200, page.text
    assert "3 contacts." in page.text and 'aria-current="page">Contacts' in page.text
    assert "1 contact." in console.get("/console/contacts?q=lovel").text
    assert "1 contact." in console.get("/console/contacts?q=ADA@exa").text
    on_news = console.get(f"/console/contacts?list={news}").text
    assert "1 contact." in on_news and "ada@example.com" in on_news
    assert "2 contacts." in console.get("/console/contacts?state=subscribed").text
    unsubscribed = console.get("/console/contacts?state=unsubscribed").text
    assert "1 contact." in unsubscribed and "=bob@example.com" in unsubscribed
    bounced = console.get("/console/contacts?state=bounced").text
    assert "1 contact." in bounced and "cy@example.com" in bounced
    assert console.get("/console/contacts?list=999999").status_code == 404

    export = console.get("/console/contacts/export.csv?state=unsubscribed")
    assert export.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(export.text)))
    # A cell a spreadsheet would run as a formula is quoted.
    assert [row["email"] for row in rows] == ["'=bob@example.com"]
    assert len(list(csv.DictReader(io.StringIO(console.get("/console/contacts/export.csv").text)))) == 3

    everyone = [str(contact_id) for contact_id in ids.values()]
    added = console.post(
        "/console/contacts/bulk",
        data={"ids": everyone, "action": "add", "list_id": str(other), "back": "/console/contacts?state="},
    )
    assert added.status_code == 303 and added.headers["location"] == "/console/contacts?state=&done=add"
    assert "3 contacts." in console.get(f"/console/contacts?list={other}").text
    refused = console.post(
        "/console/contacts/bulk", data={"ids": everyone, "action": "add", "list_id": "999"}
    )
    assert refused.status_code == 422 and "list.0: The selected list.0 is invalid." in refused.text
    removed = console.post(
        "/console/contacts/bulk", data={"ids": everyone[:2], "action": "remove", "list_id": str(other)}
    )
    assert removed.status_code == 303
    assert "1 contact." in console.get(f"/console/contacts?list={other}").text
    console.post("/console/contacts/bulk", data={"ids": everyone[:1], "action": "unsubscribe"})
    assert "2 contacts." in console.get("/console/contacts?state=unsubscribed").text
    deleted = console.post("/console/contacts/bulk", data={"ids": everyone[1:], "action": "delete"})
    assert deleted.status_code == 303
    assert "1 contact." in console.get("/console/contacts").text
    assert db.get_one(Account, person.account_id).contacts_count == 1


def test_a_contacts_page_edits_unsubscribes_and_deletes(
    console: TestClient, db: Session, person: Person, make_person: Callable[..., Person]
) -> None:
    ids, news, other = _audience(db, person)
    ada = ids["ada@example.com"]
    page = console.get(f"/console/contacts/{ada}")
    assert page.status_code == 200, page.text
    assert "London" in page.text and "No email sent to this contact yet." in page.text

    saved = console.post(
        f"/console/contacts/{ada}",
        data={
            "first_name": "Augusta",
            "last_name": "",
            "lists": [str(other)],
            "field_name": ["city", "plan"],
            "field_value": ["", "gold"],
        },
    )
    assert saved.status_code == 303, saved.text
    contact = db.get_one(Contact, ada)
    db.refresh(contact)
    assert (contact.first_name, contact.last_name) == ("Augusta", None)
    memberships = db.scalars(select(ListMembership.list_id).where(ListMembership.contact_id == ada)).all()
    assert memberships == [other]
    after = console.get(f"/console/contacts/{ada}").text
    assert "gold" in after and "London" not in after

    too_long = console.post(f"/console/contacts/{ada}", data={"first_name": "x" * 300})
    assert too_long.status_code == 422 and "first_name" in too_long.text

    assert console.post(f"/console/contacts/{ada}/lists", data={"list_id": str(news)}).status_code == 303
    assert sorted(
        db.scalars(select(ListMembership.list_id).where(ListMembership.contact_id == ada))
    ) == sorted([news, other])
    assert console.post(f"/console/contacts/{ada}/unsubscribe").status_code == 303
    db.refresh(contact)
    assert contact.unsubscribed_at is not None
    assert console.post(f"/console/contacts/{ada}/delete").status_code == 303
    gone = console.get(f"/console/contacts/{ada}")
    assert gone.status_code == 404 and "Contact not found." in gone.text
    not_an_id = console.get("/console/contacts/abc")
    assert not_an_id.status_code == 404 and not_an_id.headers["content-type"].startswith("text/html")

    stranger = make_person("stranger")
    strangers = _audience(db, stranger)[0]
    assert console.get(f"/console/contacts/{strangers['cy@example.com']}").status_code == 404
    bulk = console.post(
        "/console/contacts/bulk", data={"ids": [str(strangers["cy@example.com"])], "action": "delete"}
    )
    assert bulk.status_code == 422
