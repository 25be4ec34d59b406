"""Contact listings read as plain rows, with remembered page starts: same output as the Contact model,
and deep pages that stay right when contacts are added, deleted or restored between requests."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.mail.contact_listing import CONTACT_COLUMNS, contact_json
from app.mail.wire import ContactOut
from app.models import Contact
from tests.conftest import ApiUser


def add_contacts(client: TestClient, user: ApiUser, count: int, prefix: str = "c") -> None:
    contacts = [{"email": f"{prefix}{i:04d}@example.com", "first_name": f"N{i}"} for i in range(count)]
    response = client.post("/contacts/batch", json={"contacts": contacts}, headers=user.headers)
    assert response.status_code == 200, response.text


def emails_on(client: TestClient, user: ApiUser, page: int) -> list[str]:
    response = client.get("/contacts", params={"page": page}, headers=user.headers)
    assert response.status_code == 200
    return [c["email"] for c in response.json()["data"]]


def test_row_json_matches_the_contact_model(client: TestClient, api_user: ApiUser, db: Session) -> None:
    client.post(
        "/contacts",
        json={"email": "Ada@Example.com", "first_name": "Ada", "ip_address": "2001:db8::1"},
        headers=api_user.headers,
    )
    client.patch("/unsubscribe", json={"email": "ada@example.com"}, headers=api_user.headers)
    contact = db.scalars(select(Contact).where(Contact.email_key == "ada@example.com")).one()
    row = db.execute(select(*CONTACT_COLUMNS).where(Contact.id == contact.id)).one()
    assert contact_json(row) == ContactOut.model_validate(contact).model_dump(mode="json")
    listed = client.get("/contacts", headers=api_user.headers).json()["data"]
    assert listed == [contact_json(row)]


def test_deep_pages_follow_deletes_and_additions(client: TestClient, api_user: ApiUser) -> None:
    add_contacts(client, api_user, 250)
    expected = [f"c{i:04d}@example.com" for i in range(250)]
    assert emails_on(client, api_user, 2) == expected[100:200]
    assert emails_on(client, api_user, 3) == expected[200:250]
    # Asked again: the remembered starts give the same pages.
    assert emails_on(client, api_user, 2) == expected[100:200]

    first = client.get("/contacts", params={"email": "c0000@example.com"}, headers=api_user.headers).json()
    assert client.delete(f"/contacts/{first['data'][0]['id']}", headers=api_user.headers).status_code == 200
    assert emails_on(client, api_user, 2) == expected[101:201]
    assert emails_on(client, api_user, 3) == expected[201:250]

    add_contacts(client, api_user, 1, prefix="late")
    assert emails_on(client, api_user, 3) == [*expected[201:250], "late0000@example.com"]

    # Restoring the deleted contact puts it back where its id is.
    client.post("/contacts", json={"email": "c0000@example.com"}, headers=api_user.headers)
    assert emails_on(client, api_user, 1) == expected[:100]
    assert emails_on(client, api_user, 2) == expected[100:200]


def test_a_page_past_the_end_is_empty(client: TestClient, api_user: ApiUser) -> None:
    add_contacts(client, api_user, 3)
    page = client.get("/contacts", params={"page": 9}, headers=api_user.headers).json()
    assert page["data"] == []
    assert page["total"] == 3
    assert page["from"] is None
