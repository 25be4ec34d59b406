"""GET, POST and DELETE /suppressions: adding one address or many, paging, removing, bad bodies, the
account's own list only, and the routes marked as an extension in the OpenAPI document."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.kit.time import utcnow
from app.mail.sending.queue import fan_out_due
from app.models import Contact, Deliverable, Suppression
from tests.conftest import ApiUser
from tests.factories import create_campaign, create_contact, create_list


def add(client: TestClient, user: ApiUser, body: dict[str, Any]) -> dict[str, int]:
    response = client.post("/suppressions", json=body, headers=user.headers)
    assert response.status_code == 200, response.text
    answer: dict[str, int] = response.json()
    return answer


def listed(client: TestClient, user: ApiUser, page: int = 1) -> dict[str, Any]:
    response = client.get(f"/suppressions?page={page}", headers=user.headers)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_one_address_or_many_are_added_once_whatever_their_case(
    client: TestClient, api_user: ApiUser
) -> None:
    assert add(client, api_user, {"email": "Ann@Example.com"}) == {"created": 1, "existing": 0}
    assert add(client, api_user, {"emails": ["ann@example.COM", "bob@example.com", "BOB@example.com"]}) == {
        "created": 1,
        "existing": 1,
    }
    # A form body with PHP brackets, as SendFox's clients send.
    response = client.post(
        "/suppressions",
        data={"email": "cy@example.com", "emails[]": "dee@example.com"},
        headers=api_user.headers,
    )
    assert response.status_code == 200, response.text
    assert response.json() == {"created": 2, "existing": 0}
    page = listed(client, api_user)
    assert [(s["email"], s["reason"]) for s in page["data"]] == [
        ("Ann@Example.com", "api"),
        ("bob@example.com", "api"),
        ("cy@example.com", "api"),
        ("dee@example.com", "api"),
    ]
    assert page["total"] == 4 and page["current_page"] == 1
    assert set(page["data"][0]) == {"id", "email", "reason", "created_at"}
    assert page["data"][0]["created_at"].endswith("Z")


def test_the_list_is_paged_like_the_rest_of_the_email_api(client: TestClient, api_user: ApiUser) -> None:
    add(client, api_user, {"emails": [f"u{i:03}@example.com" for i in range(150)]})
    first, second = listed(client, api_user), listed(client, api_user, 2)
    assert (first["total"], first["per_page"], first["last_page"]) == (150, 100, 2)
    assert len(first["data"]) == 100 and len(second["data"]) == 50
    assert first["next_page_url"].endswith("/suppressions?page=2")
    assert second["data"][0]["email"] == "u100@example.com"
    assert listed(client, api_user, 3)["data"] == []


def test_delete_takes_an_address_off_the_list_and_unbounces_its_contact(
    client: TestClient, api_user: ApiUser, db: Session
) -> None:
    contact_id = create_contact(client, api_user)["id"]
    add(client, api_user, {"email": "ann@example.com"})
    db.get_one(Contact, contact_id).bounced_at = db.get_one(Contact, contact_id).created_at
    db.commit()

    response = client.delete("/suppressions/ANN@example.com", headers=api_user.headers)
    assert response.status_code == 200, response.text
    assert response.json() == {"message": "Suppression removed."}
    assert listed(client, api_user)["total"] == 0
    db.expire_all()
    assert db.get_one(Contact, contact_id).bounced_at is None
    again = client.delete("/suppressions/ann@example.com", headers=api_user.headers)
    assert again.status_code == 404
    assert again.json()["message"] == "Suppression not found."


@pytest.mark.parametrize(
    "path",
    ["nobody@example.com", "not-an-email", "%00", "x" * 400, "%F0%28%8C%BC@example.com", "%20"],
)
def test_deleting_what_is_not_listed_is_404(client: TestClient, api_user: ApiUser, path: str) -> None:
    response = client.delete(f"/suppressions/{path}", headers=api_user.headers)
    assert response.status_code == 404, response.text
    assert isinstance(response.json()["message"], str)


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"email": None},
        {"email": ""},
        {"emails": []},
        {"emails": "not-an-email"},
        {"emails": ["ok@example.com", "bad"]},
        {"emails": [{"email": "a@example.com"}]},
        {"emails": [f"u{i}@example.com" for i in range(1001)]},
        {"emails": {"a": {"b": "c"}}},
        {"email": "a\x00@example.com"},
        {"email": ["a@example.com"]},
        {"email": 12},
    ],
)
def test_bad_bodies_are_422_and_add_nothing(
    client: TestClient, api_user: ApiUser, db: Session, body: dict[str, Any]
) -> None:
    response = client.post("/suppressions", json=body, headers=api_user.headers)
    assert response.status_code == 422, response.text
    errors = response.json()["errors"]
    assert isinstance(errors, dict) and errors
    assert db.scalars(select(Suppression)).all() == []


@pytest.mark.parametrize(
    ("content", "content_type"),
    [(b"[1, 2]", "application/json"), (b"{", "application/json"), (b"\xff\x00", "text/plain")],
)
def test_unreadable_bodies_are_422(
    client: TestClient, api_user: ApiUser, content: bytes, content_type: str
) -> None:
    response = client.post(
        "/suppressions", content=content, headers={**api_user.headers, "Content-Type": content_type}
    )
    assert response.status_code == 422, response.text


def test_each_account_sees_and_removes_only_its_own_list(client: TestClient, make_user: Any) -> None:
    ann, bob = make_user(), make_user()
    add(client, ann, {"email": "x@example.com"})
    assert listed(client, bob)["total"] == 0
    assert client.delete("/suppressions/x@example.com", headers=bob.headers).status_code == 404
    assert add(client, bob, {"email": "x@example.com"}) == {"created": 1, "existing": 0}
    assert listed(client, ann)["total"] == 1


def test_the_routes_want_credentials_and_a_paid_plan(client: TestClient, make_user: Any) -> None:
    free = make_user(plan="free")
    for method, path in (
        ("GET", "/suppressions"),
        ("POST", "/suppressions"),
        ("DELETE", "/suppressions/a@b.c"),
    ):
        assert client.request(method, path).status_code == 401
        assert client.request(method, path, headers=free.headers).status_code == 403


def test_adding_an_address_cancels_the_emails_queued_for_it(
    client: TestClient, api_user: ApiUser, db: Session
) -> None:
    list_id = create_list(client, api_user)["id"]
    for address in ("ann@example.com", "bob@example.com"):
        create_contact(client, api_user, address, lists=[list_id])
    campaign_id = create_campaign(client, api_user, lists=[list_id])["id"]
    assert client.post(f"/campaigns/{campaign_id}/send", headers=api_user.headers).status_code == 200
    fan_out_due(db, utcnow())
    db.commit()
    add(client, api_user, {"email": "ANN@example.com"})
    db.expire_all()
    states = dict(
        db.execute(
            select(Contact.email, Deliverable.state).join(Deliverable, Deliverable.contact_id == Contact.id)
        ).all()
    )
    assert states == {"ann@example.com": "cancelled", "bob@example.com": "queued"}


def test_the_openapi_document_marks_the_routes_as_an_extension(client: TestClient) -> None:
    document = yaml.safe_load(client.get("/openapi.yaml").text)
    operations = [
        document["paths"]["/suppressions"]["get"],
        document["paths"]["/suppressions"]["post"],
        document["paths"]["/suppressions/{email}"]["delete"],
    ]
    for operation in operations:
        assert operation["x-tidings-extension"] is True
        assert operation["description"].startswith("Beyond SendFox")
    assert {p["name"] for p in document["paths"]["/suppressions"]["get"]["parameters"]} == {"page"}
