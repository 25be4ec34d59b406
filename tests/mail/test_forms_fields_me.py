"""GET /me, the read-only /forms routes, /contact-fields and its 100-field limit, and lists used by forms."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.kit.time import utcnow
from app.models import ContactField, Form
from tests.conftest import ApiUser
from tests.factories import create_list, make_form


def me(client: TestClient, user: ApiUser) -> dict[str, Any]:
    response = client.get("/me", headers=user.headers)
    assert response.status_code == 200, response.text
    return response.json()


# ---------------------------------------------------------------------------------------------- /me


def test_me_returns_the_user(client: TestClient, make_user: Any) -> None:
    user = make_user(email="ann@example.com", name="Ann Example", contact_limit=500)
    got = me(client, user)
    assert set(got) == {
        "id",
        "name",
        "email",
        "contacts_count",
        "contact_limit",
        "created_at",
        "updated_at",
        "track_opens",
        "public_archive",
    }
    assert got["id"] == user.user_id
    assert got["name"] == "Ann Example"
    assert got["email"] == "ann@example.com"
    assert got["contacts_count"] == 0
    assert got["contact_limit"] == 500
    assert got["created_at"].endswith("Z")
    assert got["updated_at"].endswith("Z")


def test_me_needs_authentication(client: TestClient) -> None:
    response = client.get("/me")
    assert response.status_code == 401
    assert response.json() == {"message": "Unauthenticated."}
    assert client.get("/me", headers={"Authorization": "Bearer nonsense"}).status_code == 401


def test_me_is_allowed_on_the_free_plan(client: TestClient, make_user: Any) -> None:
    free = make_user(plan="free")
    assert me(client, free)["id"] == free.user_id
    assert client.get("/forms", headers=free.headers).status_code == 403
    assert client.get("/contact-fields", headers=free.headers).status_code == 403


def test_me_contacts_count_follows_creates_and_deletes(client: TestClient, api_user: ApiUser) -> None:
    ann = client.post("/contacts", json={"email": "ann@example.com"}, headers=api_user.headers).json()
    client.post("/contacts", json={"email": "bob@example.com"}, headers=api_user.headers)
    assert me(client, api_user)["contacts_count"] == 2

    # Posting a known address (any case) updates that contact: no new one.
    client.post("/contacts", json={"email": "ANN@example.com", "first_name": "Ann"}, headers=api_user.headers)
    assert me(client, api_user)["contacts_count"] == 2

    assert client.delete(f"/contacts/{ann['id']}", headers=api_user.headers).status_code == 200
    assert me(client, api_user)["contacts_count"] == 1

    batch = client.post(
        "/contacts/batch",
        json={
            "contacts": [
                {"email": "cy@example.com"},
                {"email": "bob@example.com"},
                {"email": "di@example.com"},
            ]
        },
        headers=api_user.headers,
    )
    assert batch.json() == {"created": 2, "updated": 1}
    assert me(client, api_user)["contacts_count"] == 3

    # A deleted contact that comes back counts again.
    client.post("/contacts", json={"email": "ann@example.com"}, headers=api_user.headers)
    assert me(client, api_user)["contacts_count"] == 4


def test_me_counts_only_the_callers_account(client: TestClient, api_user: ApiUser, make_user: Any) -> None:
    other = make_user()
    client.post("/contacts", json={"email": "ann@example.com"}, headers=other.headers)
    assert me(client, api_user)["contacts_count"] == 0
    assert me(client, other)["contacts_count"] == 1


# ---------------------------------------------------------------------------------------------- /forms


def test_get_forms_lists_the_accounts_forms(
    client: TestClient, api_user: ApiUser, make_user: Any, db: Session
) -> None:
    newsletter = create_list(client, api_user)
    signup = make_form(db, api_user.account_id, "Newsletter sign-up", [newsletter["id"]])
    webinar = make_form(db, api_user.account_id, "Webinar registration", [newsletter["id"]])
    other = make_user()
    make_form(db, other.account_id, "Not mine", [create_list(client, other)["id"]])

    response = client.get("/forms", headers=api_user.headers)
    assert response.status_code == 200
    page = response.json()
    assert page["total"] == 2
    assert page["current_page"] == 1
    assert [f["id"] for f in page["data"]] == [signup, webinar]
    first = page["data"][0]
    assert set(first) == {"id", "title", "landing_page_id", "created_at", "updated_at"}
    assert first["title"] == "Newsletter sign-up"
    assert first["landing_page_id"] is None
    assert first["created_at"].endswith("Z")


def test_get_forms_searches_titles(client: TestClient, api_user: ApiUser, db: Session) -> None:
    newsletter = create_list(client, api_user)
    make_form(db, api_user.account_id, "Newsletter sign-up", [newsletter["id"]])
    webinar = make_form(db, api_user.account_id, "Webinar registration", [newsletter["id"]])
    found = client.get("/forms", params={"query": "WEBIN"}, headers=api_user.headers).json()
    assert [f["id"] for f in found["data"]] == [webinar]
    assert found["total"] == 1
    none = client.get("/forms", params={"query": "podcast"}, headers=api_user.headers).json()
    assert none["data"] == []
    assert none["total"] == 0
    everything = client.get("/forms", params={"query": ""}, headers=api_user.headers).json()
    assert everything["total"] == 2


def test_get_form(client: TestClient, api_user: ApiUser, make_user: Any, db: Session) -> None:
    newsletter = create_list(client, api_user)
    form_id = make_form(db, api_user.account_id, "Newsletter sign-up", [newsletter["id"]])
    response = client.get(f"/forms/{form_id}", headers=api_user.headers)
    assert response.status_code == 200
    assert response.json()["id"] == form_id
    assert response.json()["title"] == "Newsletter sign-up"
    assert response.json()["landing_page_id"] is None

    assert client.get("/forms/999999", headers=api_user.headers).status_code == 404
    other = make_user()
    missing = client.get(f"/forms/{form_id}", headers=other.headers)
    assert missing.status_code == 404
    assert missing.json()["message"]


def test_deleted_form_is_gone(client: TestClient, api_user: ApiUser, db: Session) -> None:
    newsletter = create_list(client, api_user)
    form_id = make_form(db, api_user.account_id, "Old form", [newsletter["id"]])
    form = db.get(Form, form_id)
    assert form is not None
    form.deleted_at = utcnow()
    db.commit()
    assert client.get(f"/forms/{form_id}", headers=api_user.headers).status_code == 404
    assert client.get("/forms", headers=api_user.headers).json()["total"] == 0


def test_delete_list_used_by_a_form_is_409_with_usages(
    client: TestClient, api_user: ApiUser, db: Session
) -> None:
    newsletter = create_list(client, api_user)
    spare = create_list(client, api_user, "Spare")
    form_id = make_form(db, api_user.account_id, "Newsletter sign-up", [newsletter["id"], spare["id"]])
    automation = client.post(
        "/automations",
        json={"title": "Welcome", "trigger_type": "apply_list", "trigger_list_id": newsletter["id"]},
        headers=api_user.headers,
    ).json()

    response = client.delete(f"/lists/{newsletter['id']}", headers=api_user.headers)
    assert response.status_code == 409
    body = response.json()
    assert body["message"]
    assert body["usages"] == [
        {"type": "form", "id": form_id, "title": "Newsletter sign-up"},
        {"type": "automation", "id": automation["id"], "title": "Welcome"},
    ]
    spare_response = client.delete(f"/lists/{spare['id']}", headers=api_user.headers)
    assert spare_response.status_code == 409
    assert spare_response.json()["usages"] == [{"type": "form", "id": form_id, "title": "Newsletter sign-up"}]
    assert client.get(f"/lists/{spare['id']}", headers=api_user.headers).status_code == 200

    # Once the form is gone the list is free.
    form = db.get(Form, form_id)
    assert form is not None
    form.deleted_at = utcnow()
    db.commit()
    assert client.delete(f"/lists/{spare['id']}", headers=api_user.headers).status_code == 200
    assert client.get(f"/lists/{spare['id']}", headers=api_user.headers).status_code == 404


# -------------------------------------------------------------------------------------------- /contact-fields


def test_contact_fields_start_empty(client: TestClient, api_user: ApiUser) -> None:
    page = client.get("/contact-fields", headers=api_user.headers).json()
    assert page["data"] == []
    assert page["total"] == 0
    assert page["per_page"] == 20
    assert client.get("/contact-fields").status_code == 401


def test_contact_fields_page_by_20(client: TestClient, api_user: ApiUser, make_user: Any) -> None:
    names = [f"field_{i:02}" for i in range(25)]
    response = client.post(
        "/contacts",
        json={"email": "ann@example.com", "contact_fields": [{"name": n, "value": "v"} for n in names]},
        headers=api_user.headers,
    )
    assert response.status_code == 200, response.text
    other = make_user()
    client.post(
        "/contacts",
        json={"email": "bob@example.com", "contact_fields": [{"name": "theirs", "value": "v"}]},
        headers=other.headers,
    )

    first = client.get("/contact-fields", headers=api_user.headers).json()
    assert first["total"] == 25
    assert first["per_page"] == 20
    assert first["last_page"] == 2
    assert [f["name"] for f in first["data"]] == names[:20]
    field = first["data"][0]
    assert set(field) == {"id", "user_id", "name", "created_at", "updated_at"}
    assert field["user_id"] == api_user.user_id
    assert field["created_at"].endswith("Z")

    second = client.get("/contact-fields", params={"page": 2}, headers=api_user.headers).json()
    assert second["current_page"] == 2
    assert [f["name"] for f in second["data"]] == names[20:]
    third = client.get("/contact-fields", params={"page": 3}, headers=api_user.headers).json()
    assert third["data"] == []
    assert [f["name"] for f in client.get("/contact-fields", headers=other.headers).json()["data"]] == [
        "theirs"
    ]


def test_known_field_names_are_not_defined_twice(client: TestClient, api_user: ApiUser) -> None:
    for email in ("ann@example.com", "bob@example.com"):
        client.post(
            "/contacts",
            json={"email": email, "contact_fields": [{"name": "city", "value": "Oslo"}]},
            headers=api_user.headers,
        )
    page = client.get("/contact-fields", headers=api_user.headers).json()
    assert [f["name"] for f in page["data"]] == ["city"]


def test_an_account_has_at_most_100_contact_fields(
    client: TestClient, api_user: ApiUser, db: Session
) -> None:
    names = [f"field_{i:03}" for i in range(100)]
    full = client.post(
        "/contacts",
        json={"email": "ann@example.com", "contact_fields": [{"name": n, "value": "v"} for n in names]},
        headers=api_user.headers,
    )
    assert full.status_code == 200, full.text
    assert client.get("/contact-fields", headers=api_user.headers).json()["total"] == 100

    response = client.post(
        "/contacts",
        json={"email": "bob@example.com", "contact_fields": [{"name": "one_too_many", "value": "v"}]},
        headers=api_user.headers,
    )
    assert response.status_code == 422
    assert list(response.json()["errors"]) == ["contact_fields"]
    # Nothing of the refused request was kept.
    assert (
        client.get("/contacts", params={"email": "bob@example.com"}, headers=api_user.headers).json()["total"]
        == 0
    )
    assert client.get("/contact-fields", headers=api_user.headers).json()["total"] == 100
    assert db.query(ContactField).filter(ContactField.name == "one_too_many").count() == 0

    ann = client.get("/contacts", params={"email": "ann@example.com"}, headers=api_user.headers).json()[
        "data"
    ][0]
    patched = client.patch(
        f"/contacts/{ann['id']}",
        json={"contact_fields": [{"name": "one_too_many", "value": "v"}]},
        headers=api_user.headers,
    )
    assert patched.status_code == 422

    # Fields already defined can still be used.
    known = client.post(
        "/contacts",
        json={"email": "bob@example.com", "contact_fields": [{"name": "field_042", "value": "v"}]},
        headers=api_user.headers,
    )
    assert known.status_code == 200


def test_the_limit_counts_new_names_of_one_request_together(client: TestClient, api_user: ApiUser) -> None:
    names = [f"field_{i:03}" for i in range(101)]
    response = client.post(
        "/contacts",
        json={"email": "ann@example.com", "contact_fields": [{"name": n, "value": "v"} for n in names]},
        headers=api_user.headers,
    )
    assert response.status_code == 422
    assert client.get("/contact-fields", headers=api_user.headers).json()["total"] == 0
    assert client.get("/contacts", headers=api_user.headers).json()["total"] == 0


def test_the_limit_is_per_account(client: TestClient, api_user: ApiUser, make_user: Any) -> None:
    names = [f"field_{i:03}" for i in range(100)]
    client.post(
        "/contacts",
        json={"email": "ann@example.com", "contact_fields": [{"name": n, "value": "v"} for n in names]},
        headers=api_user.headers,
    )
    other = make_user()
    response = client.post(
        "/contacts",
        json={"email": "ann@example.com", "contact_fields": [{"name": "own", "value": "v"}]},
        headers=other.headers,
    )
    assert response.status_code == 200
