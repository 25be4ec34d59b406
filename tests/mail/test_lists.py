"""The /lists routes: create, read, search, members, removal, and deletion with the in-use 409."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.conftest import ApiUser
from tests.factories import create_list


def test_create_list_returns_the_list_with_zero_averages(client: TestClient, api_user: ApiUser) -> None:
    created = create_list(client, api_user)
    assert created["name"] == "Newsletter"
    assert created["user_id"] == api_user.user_id
    assert created["average_email_open_percent"] == 0.0
    assert created["average_email_click_percent"] == 0.0
    assert created["created_at"].endswith("Z")


def test_create_list_reads_form_and_query_input(client: TestClient, api_user: ApiUser) -> None:
    assert (
        client.post("/lists", data={"name": "From form"}, headers=api_user.headers).json()["name"]
        == "From form"
    )
    assert client.post("/lists?name=From+query", headers=api_user.headers).json()["name"] == "From query"


def test_create_list_without_name_is_400(client: TestClient, api_user: ApiUser) -> None:
    response = client.post("/lists", json={}, headers=api_user.headers)
    assert response.status_code == 400
    assert response.json() == {
        "message": "The name field is required.",
        "errors": {"name": ["The name field is required."]},
    }


def test_list_name_over_191_characters_is_400(client: TestClient, api_user: ApiUser) -> None:
    response = client.post("/lists", json={"name": "x" * 192}, headers=api_user.headers)
    assert response.status_code == 400
    assert "name" in response.json()["errors"]


def test_get_lists_paginates_and_searches(client: TestClient, api_user: ApiUser) -> None:
    create_list(client, api_user, "Alpha")
    create_list(client, api_user, "Beta")
    page = client.get("/lists", headers=api_user.headers).json()
    assert page["total"] == 2
    assert page["current_page"] == 1
    assert [item["name"] for item in page["data"]] == ["Alpha", "Beta"]
    found = client.get("/lists", params={"query": "bet"}, headers=api_user.headers).json()
    assert [item["name"] for item in found["data"]] == ["Beta"]


def test_get_list_of_another_account_is_404(client: TestClient, api_user: ApiUser, make_user) -> None:
    other = make_user()
    theirs = create_list(client, other)
    assert client.get(f"/lists/{theirs['id']}", headers=api_user.headers).status_code == 404
    assert client.get(f"/lists/{theirs['id']}", headers=other.headers).status_code == 200


def test_list_contacts_and_removal(client: TestClient, api_user: ApiUser) -> None:
    newsletter = create_list(client, api_user)
    contact = client.post(
        "/contacts", json={"email": "ann@example.com", "lists": [newsletter["id"]]}, headers=api_user.headers
    ).json()
    members = client.get(f"/lists/{newsletter['id']}/contacts", headers=api_user.headers).json()
    assert [m["email"] for m in members["data"]] == ["ann@example.com"]

    removed = client.delete(f"/lists/{newsletter['id']}/contacts/{contact['id']}", headers=api_user.headers)
    assert removed.status_code == 200
    assert removed.json()["id"] == contact["id"]
    assert client.get(f"/lists/{newsletter['id']}/contacts", headers=api_user.headers).json()["total"] == 0
    again = client.delete(f"/lists/{newsletter['id']}/contacts/{contact['id']}", headers=api_user.headers)
    assert again.status_code == 404
    missing_list = client.delete(f"/lists/999999/contacts/{contact['id']}", headers=api_user.headers)
    assert missing_list.status_code == 404


def test_delete_list_soft_deletes(client: TestClient, api_user: ApiUser) -> None:
    newsletter = create_list(client, api_user)
    response = client.delete(f"/lists/{newsletter['id']}", headers=api_user.headers)
    assert response.status_code == 200
    assert "message" in response.json()
    assert client.get(f"/lists/{newsletter['id']}", headers=api_user.headers).status_code == 404
    assert client.delete(f"/lists/{newsletter['id']}", headers=api_user.headers).status_code == 404


def test_delete_list_used_by_an_automation_is_409_with_usages(client: TestClient, api_user: ApiUser) -> None:
    newsletter = create_list(client, api_user)
    automation = client.post(
        "/automations",
        json={"title": "Welcome", "trigger_type": "apply_list", "trigger_list_id": newsletter["id"]},
        headers=api_user.headers,
    ).json()
    response = client.delete(f"/lists/{newsletter['id']}", headers=api_user.headers)
    assert response.status_code == 409
    assert response.json()["usages"] == [{"type": "automation", "id": automation["id"], "title": "Welcome"}]
    assert client.get(f"/lists/{newsletter['id']}", headers=api_user.headers).status_code == 200
