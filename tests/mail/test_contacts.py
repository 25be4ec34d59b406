"""The /contacts routes and PATCH /unsubscribe: listing and filters, the upsert by email, lists and
custom fields, the contact limit, input from JSON, form and query string, deletion, activity, batches."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.models import Account, Contact, ContactField, ContactFieldValue, Deliverable
from tests.conftest import ApiUser
from tests.factories import add_campaign, add_deliverable, create_contact, create_list

CONTACT_KEYS = {
    "id",
    "email",
    "first_name",
    "last_name",
    "ip_address",
    "unsubscribed_at",
    "created_at",
    "updated_at",
}
ENVELOPE_KEYS = {
    "data",
    "current_page",
    "per_page",
    "total",
    "last_page",
    "from",
    "to",
    "path",
    "first_page_url",
    "last_page_url",
    "next_page_url",
    "prev_page_url",
}


# helpers ----------------------------------------------------------------------------------------------------


def list_member_emails(client: TestClient, user: ApiUser, list_id: int) -> list[str]:
    response = client.get(f"/lists/{list_id}/contacts", headers=user.headers)
    assert response.status_code == 200, response.text
    return [contact["email"] for contact in response.json()["data"]]


def contacts_page(client: TestClient, user: ApiUser, **params: Any) -> dict:
    response = client.get("/contacts", params=params, headers=user.headers)
    assert response.status_code == 200, response.text
    return response.json()


def contacts_count(client: TestClient, user: ApiUser) -> int:
    response = client.get("/me", headers=user.headers)
    assert response.status_code == 200, response.text
    return int(response.json()["contacts_count"])


def batch(client: TestClient, user: ApiUser, contacts: list[dict]) -> Any:
    return client.post("/contacts/batch", json={"contacts": contacts}, headers=user.headers)


def field_values(db: Session, contact_id: int) -> dict[str, str]:
    rows = db.execute(
        select(ContactField.name, ContactFieldValue.value)
        .join(ContactField, ContactField.id == ContactFieldValue.field_id)
        .where(ContactFieldValue.contact_id == contact_id)
    ).all()
    return dict(rows)  # type: ignore[arg-type]


def deliverable_state(db: Session, deliverable_id: int) -> str:
    return db.scalars(select(Deliverable.state).where(Deliverable.id == deliverable_id)).one()


def at(hour: int, minute: int = 0) -> datetime:
    return datetime(2024, 3, 1, hour, minute, tzinfo=UTC)


def iso(hour: int, minute: int = 0) -> str:
    return f"2024-03-01T{hour:02d}:{minute:02d}:00.000000Z"


# GET /contacts ----------------------------------------------------------------------------------------------


def test_list_contacts_on_an_empty_account_is_an_empty_first_page(
    client: TestClient, api_user: ApiUser
) -> None:
    page = contacts_page(client, api_user)
    assert set(page) == ENVELOPE_KEYS
    assert page["data"] == []
    assert page["current_page"] == 1
    assert page["per_page"] == 100
    assert page["total"] == 0
    assert page["last_page"] == 1
    assert page["from"] is None
    assert page["to"] is None
    assert page["path"] == "http://testserver/contacts"
    assert page["next_page_url"] is None
    assert page["prev_page_url"] is None
    assert page["first_page_url"] == "http://testserver/contacts?page=1"


def test_list_contacts_returns_contacts_in_creation_order(client: TestClient, api_user: ApiUser) -> None:
    first = create_contact(client, api_user, "ann@example.com", first_name="Ann")
    second = create_contact(client, api_user, "bob@example.com", first_name="Bob")
    page = contacts_page(client, api_user)
    assert page["total"] == 2
    assert page["from"] == 1
    assert page["to"] == 2
    assert [c["id"] for c in page["data"]] == [first["id"], second["id"]]
    assert set(page["data"][0]) == CONTACT_KEYS
    assert page["data"][0] == first


def test_list_contacts_pages_hold_100_contacts(client: TestClient, api_user: ApiUser) -> None:
    response = batch(client, api_user, [{"email": f"c{i:03d}@example.com"} for i in range(150)])
    assert response.json() == {"created": 150, "updated": 0}

    first = contacts_page(client, api_user)
    assert len(first["data"]) == 100
    assert first["total"] == 150
    assert first["last_page"] == 2
    assert (first["from"], first["to"]) == (1, 100)
    assert first["next_page_url"] == "http://testserver/contacts?page=2"
    assert first["prev_page_url"] is None
    assert first["last_page_url"] == "http://testserver/contacts?page=2"

    second = contacts_page(client, api_user, page=2)
    assert second["current_page"] == 2
    assert len(second["data"]) == 50
    assert (second["from"], second["to"]) == (101, 150)
    assert second["next_page_url"] is None
    assert second["prev_page_url"] == "http://testserver/contacts?page=1"

    emails = [c["email"] for c in first["data"] + second["data"]]
    assert emails == [f"c{i:03d}@example.com" for i in range(150)]

    beyond = contacts_page(client, api_user, page=3)
    assert beyond["data"] == []
    assert beyond["total"] == 150
    assert beyond["from"] is None


def test_page_urls_keep_the_filters(client: TestClient, api_user: ApiUser) -> None:
    batch(client, api_user, [{"email": f"c{i:03d}@example.com", "first_name": "Same"} for i in range(101)])
    page = contacts_page(client, api_user, query="same")
    assert page["total"] == 101
    assert page["next_page_url"] == "http://testserver/contacts?query=same&page=2"
    second = contacts_page(client, api_user, query="same", page=2)
    assert [c["email"] for c in second["data"]] == ["c100@example.com"]


def test_query_searches_email_and_names_case_insensitively(client: TestClient, api_user: ApiUser) -> None:
    create_contact(client, api_user, "ann@alpha.example", first_name="Ann", last_name="Smith")
    create_contact(client, api_user, "bob@beta.example", first_name="Robert", last_name="Jones")
    create_contact(client, api_user, "carol@gamma.example", first_name="Carol", last_name="SMITHERS")

    def found(query: str) -> list[str]:
        return [c["email"] for c in contacts_page(client, api_user, query=query)["data"]]

    assert found("BETA") == ["bob@beta.example"]
    assert found("robert") == ["bob@beta.example"]
    assert found("smith") == ["ann@alpha.example", "carol@gamma.example"]
    assert found("nobody") == []
    assert contacts_page(client, api_user, query="smith")["total"] == 2


def test_unsubscribed_filter(client: TestClient, api_user: ApiUser) -> None:
    create_contact(client, api_user, "ann@example.com")
    create_contact(client, api_user, "bob@example.com")
    client.patch("/unsubscribe", json={"email": "bob@example.com"}, headers=api_user.headers)

    gone = contacts_page(client, api_user, unsubscribed="true")
    assert [c["email"] for c in gone["data"]] == ["bob@example.com"]
    assert gone["total"] == 1
    assert gone["data"][0]["unsubscribed_at"] is not None

    staying = contacts_page(client, api_user, unsubscribed="false")
    assert [c["email"] for c in staying["data"]] == ["ann@example.com"]
    assert staying["total"] == 1

    assert [c["email"] for c in contacts_page(client, api_user, unsubscribed=1)["data"]] == [
        "bob@example.com"
    ]
    assert contacts_page(client, api_user)["total"] == 2


def test_email_filter_is_exact_and_case_insensitive(client: TestClient, api_user: ApiUser) -> None:
    create_contact(client, api_user, "ann@example.com")
    create_contact(client, api_user, "annabel@example.com")

    exact = contacts_page(client, api_user, email="ANN@Example.com")
    assert [c["email"] for c in exact["data"]] == ["ann@example.com"]
    assert exact["total"] == 1
    assert contacts_page(client, api_user, email="ann@example")["data"] == []
    assert contacts_page(client, api_user, email="ann")["total"] == 0


def test_list_contacts_leaves_out_deleted_and_other_accounts(
    client: TestClient, api_user: ApiUser, make_user: Any
) -> None:
    other = make_user()
    create_contact(client, other, "theirs@example.com")
    kept = create_contact(client, api_user, "kept@example.com")
    gone = create_contact(client, api_user, "gone@example.com")
    client.delete(f"/contacts/{gone['id']}", headers=api_user.headers)

    page = contacts_page(client, api_user)
    assert [c["id"] for c in page["data"]] == [kept["id"]]
    assert page["total"] == 1
    assert contacts_page(client, api_user, query="example")["total"] == 1
    assert contacts_page(client, api_user, email="theirs@example.com")["data"] == []


# POST /contacts ---------------------------------------------------------------------------------------------


def test_create_contact_returns_the_contact(client: TestClient, api_user: ApiUser) -> None:
    response = client.post(
        "/contacts",
        json={"email": "ann@example.com", "first_name": "Ann", "last_name": "Lee", "ip_address": "192.0.2.7"},
        headers=api_user.headers,
    )
    assert response.status_code == 200
    contact = response.json()
    assert set(contact) == CONTACT_KEYS
    assert isinstance(contact["id"], int)
    assert contact["email"] == "ann@example.com"
    assert contact["first_name"] == "Ann"
    assert contact["last_name"] == "Lee"
    assert contact["ip_address"] == "192.0.2.7"
    assert contact["unsubscribed_at"] is None
    assert contact["created_at"].endswith("Z")
    assert contact["updated_at"].endswith("Z")
    assert contacts_count(client, api_user) == 1


def test_create_contact_accepts_ipv6_and_trims_input(client: TestClient, api_user: ApiUser) -> None:
    contact = create_contact(client, api_user, "  ann@example.com ", first_name="", ip_address="2001:DB8::1")
    assert contact["email"] == "ann@example.com"
    assert contact["first_name"] is None
    assert contact["ip_address"] == "2001:db8::1"


def test_same_email_in_another_case_updates_the_one_contact(client: TestClient, api_user: ApiUser) -> None:
    first = create_contact(client, api_user, "ann@example.com", first_name="Ann", last_name="Lee")
    second = create_contact(client, api_user, "ANN@Example.COM", first_name="Annie")
    assert second["id"] == first["id"]
    assert second["first_name"] == "Annie"
    assert second["last_name"] == "Lee"  # a name left out is kept
    page = contacts_page(client, api_user)
    assert page["total"] == 1
    assert len(page["data"]) == 1
    assert contacts_count(client, api_user) == 1


def test_upsert_never_clears_unsubscribed_at(client: TestClient, api_user: ApiUser) -> None:
    create_contact(client, api_user, "ann@example.com")
    unsubscribed = client.patch("/unsubscribe", json={"email": "ann@example.com"}, headers=api_user.headers)
    stamp = unsubscribed.json()["unsubscribed_at"]
    assert stamp is not None

    again = create_contact(client, api_user, "Ann@example.com", first_name="Ann")
    assert again["unsubscribed_at"] == stamp
    assert batch(client, api_user, [{"email": "ann@example.com"}]).json() == {"created": 0, "updated": 1}
    assert client.get(f"/contacts/{again['id']}", headers=api_user.headers).json()["unsubscribed_at"] == stamp


def test_soft_deleted_contact_comes_back_with_its_id(
    client: TestClient, api_user: ApiUser, db: Session
) -> None:
    newsletter = create_list(client, api_user)["id"]
    original = create_contact(
        client,
        api_user,
        "ann@example.com",
        lists=[newsletter],
        contact_fields=[{"name": "company", "value": "Acme"}],
    )
    assert client.delete(f"/contacts/{original['id']}", headers=api_user.headers).status_code == 200
    assert contacts_count(client, api_user) == 0

    back = create_contact(client, api_user, "ANN@example.com")
    assert back["id"] == original["id"]
    assert client.get(f"/contacts/{back['id']}", headers=api_user.headers).status_code == 200
    assert contacts_page(client, api_user)["total"] == 1
    assert contacts_count(client, api_user) == 1
    # It starts like a new contact: without its old lists and custom field values.
    assert list_member_emails(client, api_user, newsletter) == []
    assert field_values(db, back["id"]) == {}


def test_create_contact_adds_it_to_lists(client: TestClient, api_user: ApiUser) -> None:
    news = create_list(client, api_user, "News")["id"]
    offers = create_list(client, api_user, "Offers")["id"]
    events = create_list(client, api_user, "Events")["id"]
    create_contact(client, api_user, "ann@example.com", lists=[news, offers])
    assert list_member_emails(client, api_user, news) == ["ann@example.com"]
    assert list_member_emails(client, api_user, offers) == ["ann@example.com"]
    assert list_member_emails(client, api_user, events) == []

    # The upsert adds lists; it does not take the contact out of the ones it had.
    create_contact(client, api_user, "ann@example.com", lists=[events, events])
    for list_id in (news, offers, events):
        assert list_member_emails(client, api_user, list_id) == ["ann@example.com"]


@pytest.mark.parametrize("whose", ["other account", "unknown", "deleted"])
def test_create_contact_with_a_list_that_is_not_the_accounts_is_400(
    client: TestClient, api_user: ApiUser, make_user: Any, whose: str
) -> None:
    mine = create_list(client, api_user, "Mine")["id"]
    if whose == "other account":
        bad = create_list(client, make_user(), "Theirs")["id"]
    elif whose == "unknown":
        bad = 987654
    else:
        bad = create_list(client, api_user, "Deleted")["id"]
        assert client.delete(f"/lists/{bad}", headers=api_user.headers).status_code == 200
    response = client.post(
        "/contacts", json={"email": "ann@example.com", "lists": [mine, bad]}, headers=api_user.headers
    )
    assert response.status_code == 400
    body = response.json()
    assert body["errors"] == {"lists.1": ["The selected lists.1 is invalid."]}
    assert body["message"] == "The selected lists.1 is invalid."
    assert contacts_page(client, api_user)["total"] == 0
    assert contacts_count(client, api_user) == 0


def test_contact_fields_create_field_definitions(client: TestClient, api_user: ApiUser, db: Session) -> None:
    ann = create_contact(
        client,
        api_user,
        "ann@example.com",
        contact_fields=[{"name": "company", "value": "Acme"}, {"name": "age", "value": 41}],
    )
    bob = create_contact(
        client, api_user, "bob@example.com", contact_fields=[{"name": "company", "value": "Bee"}]
    )

    fields = client.get("/contact-fields", headers=api_user.headers).json()
    assert [f["name"] for f in fields["data"]] == ["company", "age"]
    assert fields["total"] == 2
    assert fields["per_page"] == 20
    assert all(f["user_id"] == api_user.user_id for f in fields["data"])
    assert field_values(db, ann["id"]) == {"company": "Acme", "age": "41"}
    assert field_values(db, bob["id"]) == {"company": "Bee"}

    # A second write of a field overwrites its value and makes no new definition.
    create_contact(
        client, api_user, "ann@example.com", contact_fields=[{"name": "company", "value": "Acme 2"}]
    )
    assert field_values(db, ann["id"]) == {"company": "Acme 2", "age": "41"}
    assert client.get("/contact-fields", headers=api_user.headers).json()["total"] == 2


def test_contact_fields_of_another_account_are_not_shared(
    client: TestClient, api_user: ApiUser, make_user: Any
) -> None:
    other = make_user()
    create_contact(client, other, "x@example.com", contact_fields=[{"name": "company", "value": "Acme"}])
    assert client.get("/contact-fields", headers=api_user.headers).json()["data"] == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "email"),
        ({"first_name": "Ann"}, "email"),
        ({"email": "not-an-email"}, "email"),
        ({"email": "ann@"}, "email"),
        ({"email": ""}, "email"),
        ({"email": "ann@example.com", "ip_address": "999.1.1.1"}, "ip_address"),
        ({"email": "ann@example.com", "ip_address": "localhost"}, "ip_address"),
        ({"email": "ann@example.com", "first_name": "x" * 192}, "first_name"),
        ({"email": "ann@example.com", "lists": ["abc"]}, "lists.0"),
        ({"email": "ann@example.com", "contact_fields": [{"value": "x"}]}, "contact_fields.0.name"),
    ],
)
def test_create_contact_validation_is_400(
    client: TestClient, api_user: ApiUser, body: dict, field: str
) -> None:
    response = client.post("/contacts", json=body, headers=api_user.headers)
    assert response.status_code == 400, response.text
    payload = response.json()
    assert field in payload["errors"]
    assert isinstance(payload["message"], str)
    assert all(isinstance(m, str) for m in payload["errors"][field])
    assert contacts_page(client, api_user)["total"] == 0


def test_create_contact_error_messages(client: TestClient, api_user: ApiUser) -> None:
    missing = client.post("/contacts", json={}, headers=api_user.headers)
    assert missing.json() == {
        "message": "The email field is required.",
        "errors": {"email": ["The email field is required."]},
    }
    bad = client.post("/contacts", json={"email": "nope", "ip_address": "nope"}, headers=api_user.headers)
    assert bad.status_code == 400
    assert bad.json() == {
        "message": "The email field must be a valid email address. (and 1 more error)",
        "errors": {
            "email": ["The email field must be a valid email address."],
            "ip_address": ["The ip address field must be a valid IP address."],
        },
    }


def test_create_contact_with_a_broken_json_body_is_400(client: TestClient, api_user: ApiUser) -> None:
    response = client.post(
        "/contacts",
        content=b'{"email": ',
        headers={**api_user.headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert "body" in response.json()["errors"]


def test_contact_limit_reached_is_402(client: TestClient, make_user: Any) -> None:
    user = make_user(contact_limit=1)
    create_contact(client, user, "ann@example.com")
    response = client.post("/contacts", json={"email": "bob@example.com"}, headers=user.headers)
    assert response.status_code == 402
    assert response.json() == {
        "message": "Contact limit of 1 reached. Upgrade your plan to add more contacts.",
    }
    assert [c["email"] for c in contacts_page(client, user)["data"]] == ["ann@example.com"]
    assert contacts_count(client, user) == 1

    # Updating the contact already there is not a new contact.
    updated = client.post(
        "/contacts", json={"email": "ANN@example.com", "first_name": "A"}, headers=user.headers
    )
    assert updated.status_code == 200
    assert updated.json()["first_name"] == "A"


def test_a_restored_contact_counts_against_the_limit(client: TestClient, make_user: Any) -> None:
    user = make_user(contact_limit=1)
    ann = create_contact(client, user, "ann@example.com")
    client.delete(f"/contacts/{ann['id']}", headers=user.headers)
    create_contact(client, user, "bob@example.com")
    response = client.post("/contacts", json={"email": "ann@example.com"}, headers=user.headers)
    assert response.status_code == 402
    assert client.get(f"/contacts/{ann['id']}", headers=user.headers).status_code == 404


def test_deleting_frees_room_under_the_limit(client: TestClient, make_user: Any) -> None:
    user = make_user(contact_limit=1)
    ann = create_contact(client, user, "ann@example.com")
    assert (
        client.post("/contacts", json={"email": "bob@example.com"}, headers=user.headers).status_code == 402
    )
    client.delete(f"/contacts/{ann['id']}", headers=user.headers)
    assert (
        client.post("/contacts", json={"email": "bob@example.com"}, headers=user.headers).status_code == 200
    )


# input forms ------------------------------------------------------------------------------------------------


def test_create_contact_from_a_form_body_with_php_brackets(
    client: TestClient, api_user: ApiUser, db: Session
) -> None:
    news = create_list(client, api_user, "News")["id"]
    offers = create_list(client, api_user, "Offers")["id"]
    response = client.post(
        "/contacts",
        data={
            "email": "ann@example.com",
            "first_name": "Ann",
            "lists[]": [str(news), str(offers)],
            "contact_fields[0][name]": "company",
            "contact_fields[0][value]": "Acme",
            "contact_fields[1][name]": "city",
            "contact_fields[1][value]": "Oslo",
        },
        headers=api_user.headers,
    )
    assert response.status_code == 200, response.text
    contact = response.json()
    assert contact["first_name"] == "Ann"
    assert list_member_emails(client, api_user, news) == ["ann@example.com"]
    assert list_member_emails(client, api_user, offers) == ["ann@example.com"]
    assert field_values(db, contact["id"]) == {"company": "Acme", "city": "Oslo"}


def test_create_contact_from_the_query_string(client: TestClient, api_user: ApiUser, db: Session) -> None:
    news = create_list(client, api_user, "News")["id"]
    offers = create_list(client, api_user, "Offers")["id"]
    response = client.post(
        f"/contacts?email=bob%40example.com&last_name=Stone&lists[]={news}&lists[]={offers}"
        "&contact_fields[0][name]=company&contact_fields[0][value]=Acme",
        headers=api_user.headers,
    )
    assert response.status_code == 200, response.text
    contact = response.json()
    assert contact["email"] == "bob@example.com"
    assert contact["last_name"] == "Stone"
    assert list_member_emails(client, api_user, news) == ["bob@example.com"]
    assert list_member_emails(client, api_user, offers) == ["bob@example.com"]
    assert field_values(db, contact["id"]) == {"company": "Acme"}


def test_query_string_lists_may_be_comma_separated(client: TestClient, api_user: ApiUser) -> None:
    news = create_list(client, api_user, "News")["id"]
    offers = create_list(client, api_user, "Offers")["id"]
    response = client.post(
        f"/contacts?email=cy%40example.com&lists={news},{offers}", headers=api_user.headers
    )
    assert response.status_code == 200, response.text
    assert list_member_emails(client, api_user, offers) == ["cy@example.com"]


def test_json_body_wins_over_the_query_string(client: TestClient, api_user: ApiUser) -> None:
    response = client.post(
        "/contacts?email=query%40example.com&first_name=Query",
        json={"email": "body@example.com"},
        headers=api_user.headers,
    )
    assert response.status_code == 200
    assert response.json()["email"] == "body@example.com"
    assert response.json()["first_name"] == "Query"


def test_query_string_validation_is_400(client: TestClient, api_user: ApiUser) -> None:
    response = client.post("/contacts?email=not-an-email", headers=api_user.headers)
    assert response.status_code == 400
    assert "email" in response.json()["errors"]


# GET /contacts/{id} -----------------------------------------------------------------------------------------


def test_get_contact(client: TestClient, api_user: ApiUser) -> None:
    created = create_contact(client, api_user, "ann@example.com", first_name="Ann")
    response = client.get(f"/contacts/{created['id']}", headers=api_user.headers)
    assert response.status_code == 200
    assert response.json() == created


def test_get_unknown_contact_is_404(client: TestClient, api_user: ApiUser) -> None:
    response = client.get("/contacts/987654", headers=api_user.headers)
    assert response.status_code == 404
    assert response.json() == {"message": "Contact not found."}


def test_get_contact_of_another_account_is_404(client: TestClient, api_user: ApiUser, make_user: Any) -> None:
    other = make_user()
    theirs = create_contact(client, other, "theirs@example.com")
    assert client.get(f"/contacts/{theirs['id']}", headers=api_user.headers).status_code == 404
    assert client.get(f"/contacts/{theirs['id']}", headers=other.headers).status_code == 200


@pytest.mark.parametrize("path", ["/contacts/abc", "/contacts/1.5", "/contacts/abc/activity"])
def test_non_integer_contact_id_is_404(client: TestClient, api_user: ApiUser, path: str) -> None:
    for method in ("GET", "PATCH", "DELETE") if not path.endswith("activity") else ("GET",):
        response = client.request(method, path, headers=api_user.headers)
        assert response.status_code == 404, (method, response.text)
        assert response.json() == {"message": "Not Found."}


# PATCH /contacts/{id} ---------------------------------------------------------------------------------------


def test_patch_contact_updates_the_given_fields(client: TestClient, api_user: ApiUser) -> None:
    created = create_contact(client, api_user, "ann@example.com", first_name="Ann", last_name="Lee")
    response = client.patch(
        f"/contacts/{created['id']}",
        json={"first_name": "Annie", "email": "changed@example.com"},
        headers=api_user.headers,
    )
    assert response.status_code == 200, response.text
    patched = response.json()
    assert patched["id"] == created["id"]
    assert patched["first_name"] == "Annie"
    assert patched["last_name"] == "Lee"
    assert patched["email"] == "ann@example.com"  # the email is not changed by PATCH
    assert patched["updated_at"] >= created["updated_at"]
    assert client.get(f"/contacts/{created['id']}", headers=api_user.headers).json() == patched


def test_patch_contact_with_null_clears_a_name(client: TestClient, api_user: ApiUser) -> None:
    created = create_contact(client, api_user, "ann@example.com", first_name="Ann", last_name="Lee")
    patched = client.patch(f"/contacts/{created['id']}", json={"last_name": None}, headers=api_user.headers)
    assert patched.json()["last_name"] is None
    assert patched.json()["first_name"] == "Ann"


def test_patch_lists_replaces_memberships(client: TestClient, api_user: ApiUser) -> None:
    news = create_list(client, api_user, "News")["id"]
    offers = create_list(client, api_user, "Offers")["id"]
    events = create_list(client, api_user, "Events")["id"]
    contact = create_contact(client, api_user, "ann@example.com", lists=[news, offers])
    bob = create_contact(client, api_user, "bob@example.com", lists=[news])

    response = client.patch(f"/contacts/{contact['id']}", json={"lists": [events]}, headers=api_user.headers)
    assert response.status_code == 200
    assert list_member_emails(client, api_user, news) == ["bob@example.com"]
    assert list_member_emails(client, api_user, offers) == []
    assert list_member_emails(client, api_user, events) == ["ann@example.com"]

    # Leaving lists out keeps them; an empty array takes the contact out of every list.
    client.patch(f"/contacts/{contact['id']}", json={"first_name": "Ann"}, headers=api_user.headers)
    assert list_member_emails(client, api_user, events) == ["ann@example.com"]
    client.patch(f"/contacts/{contact['id']}", json={"lists": []}, headers=api_user.headers)
    assert list_member_emails(client, api_user, events) == []
    assert list_member_emails(client, api_user, news) == [bob["email"]]


def test_patch_lists_from_a_form_body(client: TestClient, api_user: ApiUser) -> None:
    news = create_list(client, api_user, "News")["id"]
    offers = create_list(client, api_user, "Offers")["id"]
    contact = create_contact(client, api_user, "ann@example.com", lists=[news])
    response = client.patch(
        f"/contacts/{contact['id']}", data={"lists[]": [str(offers)]}, headers=api_user.headers
    )
    assert response.status_code == 200, response.text
    assert list_member_emails(client, api_user, news) == []
    assert list_member_emails(client, api_user, offers) == ["ann@example.com"]


def test_patch_contact_fields_sets_and_null_removes(
    client: TestClient, api_user: ApiUser, db: Session
) -> None:
    contact = create_contact(
        client,
        api_user,
        "ann@example.com",
        contact_fields=[{"name": "company", "value": "Acme"}, {"name": "city", "value": "Oslo"}],
    )
    response = client.patch(
        f"/contacts/{contact['id']}",
        json={"contact_fields": [{"name": "company", "value": None}, {"name": "city", "value": "Bergen"}]},
        headers=api_user.headers,
    )
    assert response.status_code == 200, response.text
    assert field_values(db, contact["id"]) == {"city": "Bergen"}
    # The definition stays; only the contact's value went.
    names = [f["name"] for f in client.get("/contact-fields", headers=api_user.headers).json()["data"]]
    assert names == ["company", "city"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"first_name": {"nested": "object"}}, "first_name"),
        ({"last_name": ["a", "b"]}, "last_name"),
        ({"lists": ["abc"]}, "lists.0"),
        ({"lists": [{"id": 1}]}, "lists.0"),
        ({"contact_fields": "company"}, "contact_fields.0"),
        ({"contact_fields": [{"name": "company", "value": {"x": 1}}]}, "contact_fields.0.value"),
        ({"first_name": "x" * 192}, "first_name"),
        ({"contact_fields": [{"name": "notes", "value": "x" * 65536}]}, "contact_fields.0.value"),
        ({"contact_fields": [{"name": "n" * 192, "value": "x"}]}, "contact_fields.0.name"),
    ],
)
def test_patch_contact_with_bad_types_is_422(
    client: TestClient, api_user: ApiUser, body: dict, field: str
) -> None:
    contact = create_contact(client, api_user, "ann@example.com", first_name="Ann")
    response = client.patch(f"/contacts/{contact['id']}", json=body, headers=api_user.headers)
    assert response.status_code == 422, response.text
    assert field in response.json()["errors"]
    assert client.get(f"/contacts/{contact['id']}", headers=api_user.headers).json()["first_name"] == "Ann"


def test_patch_contact_with_another_accounts_list_is_422(
    client: TestClient, api_user: ApiUser, make_user: Any
) -> None:
    mine = create_list(client, api_user, "Mine")["id"]
    theirs = create_list(client, make_user(), "Theirs")["id"]
    contact = create_contact(client, api_user, "ann@example.com", lists=[mine])
    response = client.patch(f"/contacts/{contact['id']}", json={"lists": [theirs]}, headers=api_user.headers)
    assert response.status_code == 422
    assert response.json()["errors"] == {"lists.0": ["The selected lists.0 is invalid."]}
    assert list_member_emails(client, api_user, mine) == ["ann@example.com"]


def test_patch_contact_with_a_broken_body_is_422(client: TestClient, api_user: ApiUser) -> None:
    contact = create_contact(client, api_user)
    response = client.patch(
        f"/contacts/{contact['id']}",
        content=b"[1, 2",
        headers={**api_user.headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 422


def test_patch_unknown_deleted_or_foreign_contact_is_404(
    client: TestClient, api_user: ApiUser, make_user: Any
) -> None:
    other = make_user()
    theirs = create_contact(client, other, "theirs@example.com", first_name="Theirs")
    gone = create_contact(client, api_user, "gone@example.com")
    client.delete(f"/contacts/{gone['id']}", headers=api_user.headers)
    for contact_id in (987654, theirs["id"], gone["id"]):
        response = client.patch(f"/contacts/{contact_id}", json={"first_name": "X"}, headers=api_user.headers)
        assert response.status_code == 404
        assert response.json() == {"message": "Contact not found."}
    assert client.get(f"/contacts/{theirs['id']}", headers=other.headers).json()["first_name"] == "Theirs"


# DELETE /contacts/{id} --------------------------------------------------------------------------------------


def test_delete_contact(client: TestClient, api_user: ApiUser, db: Session) -> None:
    ann = create_contact(client, api_user, "ann@example.com")
    create_contact(client, api_user, "bob@example.com")
    assert contacts_count(client, api_user) == 2

    response = client.delete(f"/contacts/{ann['id']}", headers=api_user.headers)
    assert response.status_code == 200
    assert response.json() == {"message": "Contact deleted."}
    assert client.get(f"/contacts/{ann['id']}", headers=api_user.headers).status_code == 404
    assert client.delete(f"/contacts/{ann['id']}", headers=api_user.headers).status_code == 404
    assert contacts_count(client, api_user) == 1
    assert [c["email"] for c in contacts_page(client, api_user)["data"]] == ["bob@example.com"]
    # Soft delete: the row is still there.
    assert db.scalars(select(Contact.deleted_at).where(Contact.id == ann["id"])).one() is not None


def test_delete_contact_cancels_its_queued_deliverables(
    client: TestClient, api_user: ApiUser, db: Session
) -> None:
    ann = create_contact(client, api_user, "ann@example.com")
    bob = create_contact(client, api_user, "bob@example.com")
    first = add_campaign(db, api_user.account_id, "First")
    second = add_campaign(db, api_user.account_id, "Second")
    queued = add_deliverable(db, api_user.account_id, first, ann["id"])
    sent = add_deliverable(db, api_user.account_id, second, ann["id"], state="sent", sent_at=at(9))
    others = add_deliverable(db, api_user.account_id, first, bob["id"])

    assert client.delete(f"/contacts/{ann['id']}", headers=api_user.headers).status_code == 200
    assert deliverable_state(db, queued) == "cancelled"
    assert deliverable_state(db, sent) == "sent"
    assert deliverable_state(db, others) == "queued"


def test_delete_contact_of_another_account_is_404(
    client: TestClient, api_user: ApiUser, make_user: Any
) -> None:
    other = make_user()
    theirs = create_contact(client, other, "theirs@example.com")
    response = client.delete(f"/contacts/{theirs['id']}", headers=api_user.headers)
    assert response.status_code == 404
    assert response.json() == {"message": "Contact not found."}
    assert client.get(f"/contacts/{theirs['id']}", headers=other.headers).status_code == 200
    assert contacts_count(client, other) == 1
    assert client.delete("/contacts/987654", headers=api_user.headers).status_code == 404


# activity ---------------------------------------------------------------------------------------------------


def test_activity_of_a_new_contact_is_empty(client: TestClient, api_user: ApiUser) -> None:
    contact = create_contact(client, api_user)
    response = client.get(f"/contacts/{contact['id']}/activity", headers=api_user.headers)
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"contact", "deliverables"}
    assert body["contact"] == {
        "last_sent_at": None,
        "last_opened_at": None,
        "last_clicked_at": None,
        "unsubscribed_at": None,
        "bounced_at": None,
    }
    deliverables = body["deliverables"]
    assert set(deliverables) == ENVELOPE_KEYS
    assert deliverables["data"] == []
    assert deliverables["total"] == 0
    assert deliverables["current_page"] == 1
    assert deliverables["path"] == f"http://testserver/contacts/{contact['id']}/activity"


def test_activity_reports_the_contacts_deliverables(
    client: TestClient, api_user: ApiUser, db: Session
) -> None:
    ann = create_contact(client, api_user, "ann@example.com")
    bob = create_contact(client, api_user, "bob@example.com")
    spring = add_campaign(db, api_user.account_id, "Spring sale")
    summer = add_campaign(db, api_user.account_id, "Summer sale")
    autumn = add_campaign(db, api_user.account_id, "Autumn sale")
    add_deliverable(
        db,
        api_user.account_id,
        spring,
        ann["id"],
        state="sent",
        sent_at=at(8),
        opened_at=at(9),
        clicked_at=at(9, 30),
    )
    add_deliverable(
        db,
        api_user.account_id,
        summer,
        ann["id"],
        state="bounced",
        sent_at=at(10),
        bounced_at=at(10, 5),
        spam_at=at(10, 6),
        unsubscribed_at=at(10, 7),
    )
    add_deliverable(db, api_user.account_id, autumn, ann["id"], state="cancelled")
    add_deliverable(
        db, api_user.account_id, autumn, bob["id"], state="sent", sent_at=at(23), opened_at=at(23)
    )
    winter = add_campaign(db, api_user.account_id, "Winter sale")
    add_deliverable(
        db,
        api_user.account_id,
        winter,
        ann["id"],
        state="sent",
        sent_at=at(7),
        opened_at=at(7, 30),
        clicked_at=at(7, 45),
    )
    contact_row = db.get_one(Contact, ann["id"])
    contact_row.bounced_at = at(10, 5)
    db.commit()
    unsubscribed = client.patch("/unsubscribe", json={"email": "ann@example.com"}, headers=api_user.headers)

    response = client.get(f"/contacts/{ann['id']}/activity", headers=api_user.headers)
    assert response.status_code == 200
    body = response.json()
    assert body["contact"] == {
        "last_sent_at": iso(10),
        "last_opened_at": iso(9),
        "last_clicked_at": iso(9, 30),
        "unsubscribed_at": unsubscribed.json()["unsubscribed_at"],
        "bounced_at": iso(10, 5),
    }
    deliverables = body["deliverables"]
    assert deliverables["total"] == 3  # the cancelled one is left out
    assert deliverables["per_page"] == 100
    assert deliverables["data"] == [
        {
            "campaign_title": "Winter sale",
            "campaign_id": winter,
            "sent_at": iso(7),
            "opened_at": iso(7, 30),
            "clicked_at": iso(7, 45),
            "bounced_at": None,
            "unsubscribed_at": None,
            "spam_at": None,
        },
        {
            "campaign_title": "Summer sale",
            "campaign_id": summer,
            "sent_at": iso(10),
            "opened_at": None,
            "clicked_at": None,
            "bounced_at": iso(10, 5),
            "unsubscribed_at": iso(10, 7),
            "spam_at": iso(10, 6),
        },
        {
            "campaign_title": "Spring sale",
            "campaign_id": spring,
            "sent_at": iso(8),
            "opened_at": iso(9),
            "clicked_at": iso(9, 30),
            "bounced_at": None,
            "unsubscribed_at": None,
            "spam_at": None,
        },
    ]


def test_activity_of_unknown_or_foreign_contact_is_404(
    client: TestClient, api_user: ApiUser, make_user: Any
) -> None:
    other = make_user()
    theirs = create_contact(client, other, "theirs@example.com")
    gone = create_contact(client, api_user, "gone@example.com")
    client.delete(f"/contacts/{gone['id']}", headers=api_user.headers)
    for contact_id in (987654, theirs["id"], gone["id"]):
        response = client.get(f"/contacts/{contact_id}/activity", headers=api_user.headers)
        assert response.status_code == 404
        assert response.json() == {"message": "Contact not found."}


# batch ------------------------------------------------------------------------------------------------------


def test_batch_creates_and_updates(client: TestClient, api_user: ApiUser) -> None:
    news = create_list(client, api_user)["id"]
    existing = create_contact(client, api_user, "ann@example.com", first_name="Ann", last_name="Lee")
    response = batch(
        client,
        api_user,
        [
            {"email": "ANN@example.com", "first_name": "Annie"},
            {"email": "bob@example.com", "first_name": "Bob", "lists": [news]},
            {"email": "cy@example.com"},
        ],
    )
    assert response.status_code == 200, response.text
    assert response.json() == {"created": 2, "updated": 1}

    page = contacts_page(client, api_user)
    assert page["total"] == 3
    by_email = {c["email"]: c for c in page["data"]}
    assert set(by_email) == {"ann@example.com", "bob@example.com", "cy@example.com"}
    assert by_email["ann@example.com"]["id"] == existing["id"]
    assert by_email["ann@example.com"]["first_name"] == "Annie"
    assert by_email["ann@example.com"]["last_name"] == "Lee"
    assert by_email["bob@example.com"]["first_name"] == "Bob"
    assert list_member_emails(client, api_user, news) == ["bob@example.com"]
    assert contacts_count(client, api_user) == 3


def test_batch_counts_duplicates_once(client: TestClient, api_user: ApiUser) -> None:
    news = create_list(client, api_user, "News")["id"]
    offers = create_list(client, api_user, "Offers")["id"]
    response = batch(
        client,
        api_user,
        [
            {"email": "ann@example.com", "first_name": "Ann", "lists": [news]},
            {"email": "bob@example.com"},
            {"email": "ANN@EXAMPLE.COM", "last_name": "Lee", "lists": [offers]},
        ],
    )
    assert response.status_code == 200, response.text
    assert response.json() == {"created": 2, "updated": 0}
    page = contacts_page(client, api_user)
    assert page["total"] == 2
    ann = next(c for c in page["data"] if c["email"].lower() == "ann@example.com")
    assert (ann["first_name"], ann["last_name"]) == ("Ann", "Lee")
    assert list_member_emails(client, api_user, news) == [ann["email"]]
    assert list_member_emails(client, api_user, offers) == [ann["email"]]
    assert contacts_count(client, api_user) == 2


def test_batch_brings_back_a_deleted_contact(client: TestClient, api_user: ApiUser) -> None:
    ann = create_contact(client, api_user, "ann@example.com")
    client.delete(f"/contacts/{ann['id']}", headers=api_user.headers)
    assert batch(client, api_user, [{"email": "ann@example.com"}]).json() == {"created": 1, "updated": 0}
    assert client.get(f"/contacts/{ann['id']}", headers=api_user.headers).status_code == 200
    assert contacts_count(client, api_user) == 1


def test_batch_of_1000_is_accepted(client: TestClient, api_user: ApiUser) -> None:
    response = batch(client, api_user, [{"email": f"c{i}@example.com"} for i in range(1000)])
    assert response.status_code == 200
    assert response.json() == {"created": 1000, "updated": 0}
    assert contacts_count(client, api_user) == 1000


def test_batch_over_1000_is_422(client: TestClient, api_user: ApiUser) -> None:
    response = batch(client, api_user, [{"email": f"c{i}@example.com"} for i in range(1001)])
    assert response.status_code == 422
    assert response.json()["errors"] == {
        "contacts": ["The contacts field must not have more than 1000 items."]
    }
    assert contacts_page(client, api_user)["total"] == 0


def test_batch_that_would_pass_the_limit_is_402_and_creates_nothing(
    client: TestClient, make_user: Any
) -> None:
    user = make_user(contact_limit=3)
    create_contact(client, user, "ann@example.com")
    response = batch(
        client,
        user,
        [
            {"email": "ann@example.com", "first_name": "Changed"},
            *({"email": f"n{i}@example.com"} for i in range(3)),
        ],
    )
    assert response.status_code == 402
    assert response.json() == {
        "message": "Contact limit of 3 reached. Upgrade your plan to add more contacts."
    }
    page = contacts_page(client, user)
    assert [c["email"] for c in page["data"]] == ["ann@example.com"]
    assert page["data"][0]["first_name"] is None  # the update in the refused batch did not happen either
    assert contacts_count(client, user) == 1

    # Up to the limit is fine, and so is a batch of updates at the limit.
    assert batch(client, user, [{"email": "n0@example.com"}, {"email": "n1@example.com"}]).json() == {
        "created": 2,
        "updated": 0,
    }
    assert batch(client, user, [{"email": "n0@example.com", "first_name": "N"}]).json() == {
        "created": 0,
        "updated": 1,
    }


def test_batch_with_an_invalid_item_is_422_and_creates_nothing(client: TestClient, api_user: ApiUser) -> None:
    response = batch(
        client,
        api_user,
        [{"email": "ok@example.com"}, {"email": "broken"}, {"first_name": "No email"}],
    )
    assert response.status_code == 422
    errors = response.json()["errors"]
    assert errors["contacts.1.email"] == ["The contacts.1.email field must be a valid email address."]
    assert errors["contacts.2.email"] == ["The contacts.2.email field is required."]
    assert contacts_page(client, api_user)["total"] == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "contacts"),
        ({"contacts": "ann@example.com"}, "contacts"),
        ({"contacts": [{"email": "a@example.com", "lists": ["x"]}]}, "contacts.0.lists.0"),
        ({"contacts": [{"email": "a@example.com", "ip_address": "1.2.3"}]}, "contacts.0.ip_address"),
    ],
)
def test_batch_validation_is_422(client: TestClient, api_user: ApiUser, body: dict, field: str) -> None:
    response = client.post("/contacts/batch", json=body, headers=api_user.headers)
    assert response.status_code == 422, response.text
    assert field in response.json()["errors"]


def test_batch_with_another_accounts_list_is_422(
    client: TestClient, api_user: ApiUser, make_user: Any
) -> None:
    theirs = create_list(client, make_user(), "Theirs")["id"]
    mine = create_list(client, api_user, "Mine")["id"]
    response = batch(
        client,
        api_user,
        [
            {"email": "ann@example.com", "lists": [mine]},
            {"email": "bob@example.com", "lists": [mine, theirs]},
        ],
    )
    assert response.status_code == 422
    # Named like Laravel names it: the item and the position in its own lists.
    assert response.json()["errors"] == {
        "contacts.1.lists.1": ["The selected contacts.1.lists.1 is invalid."]
    }
    assert contacts_page(client, api_user)["total"] == 0


def test_batch_from_a_form_body(client: TestClient, api_user: ApiUser) -> None:
    news = create_list(client, api_user)["id"]
    response = client.post(
        "/contacts/batch",
        data={
            "contacts[0][email]": "ann@example.com",
            "contacts[0][lists][]": str(news),
            "contacts[1][email]": "bob@example.com",
            "contacts[1][first_name]": "Bob",
        },
        headers=api_user.headers,
    )
    assert response.status_code == 200, response.text
    assert response.json() == {"created": 2, "updated": 0}
    assert list_member_emails(client, api_user, news) == ["ann@example.com"]


# unsubscribed -----------------------------------------------------------------------------------------------


def test_list_unsubscribed_contacts(client: TestClient, api_user: ApiUser, make_user: Any) -> None:
    other = make_user()
    create_contact(client, other, "theirs@example.com")
    client.patch("/unsubscribe", json={"email": "theirs@example.com"}, headers=other.headers)
    for email in ("ann@example.com", "bob@example.com", "cy@example.com", "dee@example.com"):
        create_contact(client, api_user, email)
    for email in ("bob@example.com", "cy@example.com", "dee@example.com"):
        client.patch("/unsubscribe", json={"email": email}, headers=api_user.headers)
    dee = contacts_page(client, api_user, email="dee@example.com")["data"][0]
    client.delete(f"/contacts/{dee['id']}", headers=api_user.headers)

    response = client.get("/contacts/unsubscribed", headers=api_user.headers)
    assert response.status_code == 200
    page = response.json()
    assert set(page) == ENVELOPE_KEYS
    assert [c["email"] for c in page["data"]] == ["bob@example.com", "cy@example.com"]
    assert page["total"] == 2
    assert page["per_page"] == 100
    assert all(c["unsubscribed_at"] for c in page["data"])

    found = client.get("/contacts/unsubscribed", params={"query": "CY"}, headers=api_user.headers).json()
    assert [c["email"] for c in found["data"]] == ["cy@example.com"]
    assert found["total"] == 1


# PATCH /unsubscribe -----------------------------------------------------------------------------------------


def test_unsubscribe_sets_unsubscribed_at(client: TestClient, api_user: ApiUser) -> None:
    contact = create_contact(client, api_user, "ann@example.com")
    response = client.patch("/unsubscribe", json={"email": "Ann@Example.com"}, headers=api_user.headers)
    assert response.status_code == 200
    body = response.json()
    assert set(body) == CONTACT_KEYS
    assert body["id"] == contact["id"]
    assert body["unsubscribed_at"] is not None
    assert body["unsubscribed_at"].endswith("Z")
    fetched = client.get(f"/contacts/{contact['id']}", headers=api_user.headers).json()
    assert fetched["unsubscribed_at"] == body["unsubscribed_at"]

    # A second call keeps the first moment.
    again = client.patch("/unsubscribe", json={"email": "ann@example.com"}, headers=api_user.headers)
    assert again.status_code == 200
    assert again.json()["unsubscribed_at"] == body["unsubscribed_at"]


def test_unsubscribe_cancels_queued_deliverables(client: TestClient, api_user: ApiUser, db: Session) -> None:
    contact = create_contact(client, api_user, "ann@example.com")
    queued = add_deliverable(db, api_user.account_id, add_campaign(db, api_user.account_id), contact["id"])
    client.patch("/unsubscribe", json={"email": "ann@example.com"}, headers=api_user.headers)
    assert deliverable_state(db, queued) == "cancelled"


def test_unsubscribe_reads_form_and_query_input(client: TestClient, api_user: ApiUser) -> None:
    create_contact(client, api_user, "ann@example.com")
    create_contact(client, api_user, "bob@example.com")
    by_form = client.patch("/unsubscribe", data={"email": "ann@example.com"}, headers=api_user.headers)
    assert by_form.status_code == 200
    assert by_form.json()["unsubscribed_at"] is not None
    by_query = client.patch("/unsubscribe?email=bob%40example.com", headers=api_user.headers)
    assert by_query.status_code == 200
    assert by_query.json()["email"] == "bob@example.com"
    assert contacts_page(client, api_user, unsubscribed="true")["total"] == 2


@pytest.mark.parametrize("body", [{}, {"email": ""}, {"email": "not-an-email"}, {"email": ["a@example.com"]}])
def test_unsubscribe_without_a_valid_email_is_400(client: TestClient, api_user: ApiUser, body: dict) -> None:
    create_contact(client, api_user, "a@example.com")
    response = client.patch("/unsubscribe", json=body, headers=api_user.headers)
    assert response.status_code == 400, response.text
    assert "email" in response.json()["errors"]
    assert contacts_page(client, api_user, unsubscribed="true")["total"] == 0


def test_unsubscribe_unknown_email_is_404(client: TestClient, api_user: ApiUser, make_user: Any) -> None:
    other = make_user()
    create_contact(client, other, "theirs@example.com")
    gone = create_contact(client, api_user, "gone@example.com")
    client.delete(f"/contacts/{gone['id']}", headers=api_user.headers)
    for email in ("nobody@example.com", "theirs@example.com", "gone@example.com"):
        response = client.patch("/unsubscribe", json={"email": email}, headers=api_user.headers)
        assert response.status_code == 404
        assert response.json() == {"message": "Contact not found."}
    assert contacts_page(client, other, unsubscribed="true")["total"] == 0


# counts -----------------------------------------------------------------------------------------------------


def test_contacts_count_follows_every_write(client: TestClient, api_user: ApiUser, db: Session) -> None:
    create_contact(client, api_user, "ann@example.com")
    create_contact(client, api_user, "ANN@example.com")
    batch(client, api_user, [{"email": "bob@example.com"}, {"email": "ann@example.com"}])
    assert contacts_count(client, api_user) == 2
    bob = contacts_page(client, api_user, email="bob@example.com")["data"][0]
    client.delete(f"/contacts/{bob['id']}", headers=api_user.headers)
    client.patch("/unsubscribe", json={"email": "ann@example.com"}, headers=api_user.headers)
    assert contacts_count(client, api_user) == 1
    live = db.scalar(
        select(func.count())
        .select_from(Contact)
        .where(Contact.account_id == api_user.account_id, Contact.deleted_at.is_(None))
    )
    stored = db.scalars(select(Account.contacts_count).where(Account.id == api_user.account_id)).one()
    assert live == stored == 1
