"""The /automations routes and /automation-emails: triggers, the email sequence and its order, deletion."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.kit.time import utcnow
from app.models import Campaign, Contact, Deliverable
from tests.conftest import ApiUser
from tests.factories import create_automation, create_campaign, create_list


def email_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "subject": "Welcome aboard",
        "html": "<p>Glad you are here</p>",
        "from_name": "Ann",
        "from_email": "ann@example.com",
    }
    body.update(overrides)
    return body


def add_email(client: TestClient, user: ApiUser, automation_id: int, **overrides: Any) -> dict[str, Any]:
    response = client.post(
        f"/automations/{automation_id}/emails", json=email_body(**overrides), headers=user.headers
    )
    assert response.status_code == 201, response.text
    return response.json()


def get_automation(client: TestClient, user: ApiUser, automation_id: int) -> dict[str, Any]:
    response = client.get(f"/automations/{automation_id}", headers=user.headers)
    assert response.status_code == 200, response.text
    return response.json()


def order_of(client: TestClient, user: ApiUser, automation_id: int) -> list[tuple[str, int]]:
    items = get_automation(client, user, automation_id)["automation_items"]
    return [(item["campaign"]["subject"], item["send_order"]) for item in items]


# ---------------------------------------------------------------------------------------------- POST


def test_automations_need_authentication_and_a_paid_plan(client: TestClient, make_user: Any) -> None:
    assert client.get("/automations").status_code == 401
    assert client.post("/automations", json={"title": "x"}).status_code == 401
    free = make_user(plan="free")
    assert client.post("/automations", json={"title": "x"}, headers=free.headers).status_code == 403
    assert client.get("/automations", headers=free.headers).status_code == 403


def test_create_automation_with_an_apply_list_trigger(client: TestClient, api_user: ApiUser) -> None:
    newsletter = create_list(client, api_user)
    response = client.post(
        "/automations",
        json={"title": "Welcome series", "trigger_type": "apply_list", "trigger_list_id": newsletter["id"]},
        headers=api_user.headers,
    )
    assert response.status_code == 201, response.text
    created = response.json()
    assert created["title"] == "Welcome series"
    assert created["user_id"] == api_user.user_id
    assert created["active"] is False
    assert created["automation_items"] == []
    assert created["created_at"].endswith("Z")
    [trigger] = created["automation_triggers"]
    assert trigger["automation_id"] == created["id"]
    assert trigger["type"] == "apply_list"
    assert trigger["list_id"] == newsletter["id"]
    assert trigger["campaign_id"] is None
    assert trigger["created_at"].endswith("Z")
    assert get_automation(client, api_user, created["id"])["automation_triggers"] == [trigger]


def test_create_automation_without_a_trigger(client: TestClient, api_user: ApiUser) -> None:
    created = create_automation(client, api_user)
    assert created["automation_triggers"] == []
    assert created["automation_items"] == []
    assert created["active"] is False


def test_create_active_automation(client: TestClient, api_user: ApiUser) -> None:
    assert create_automation(client, api_user, active=True)["active"] is True
    assert create_automation(client, api_user, active=False)["active"] is False


@pytest.mark.parametrize("trigger_type", ["open_campaign", "click_campaign"])
def test_create_automation_with_a_campaign_trigger(
    client: TestClient, api_user: ApiUser, trigger_type: str
) -> None:
    campaign = create_campaign(client, api_user)
    created = create_automation(
        client, api_user, trigger_type=trigger_type, trigger_campaign_id=campaign["id"]
    )
    [trigger] = created["automation_triggers"]
    assert trigger["type"] == trigger_type
    assert trigger["campaign_id"] == campaign["id"]
    assert trigger["list_id"] is None


def test_create_automation_without_title_is_422(client: TestClient, api_user: ApiUser) -> None:
    for body in ({}, {"title": ""}, {"title": "   "}, {"active": True}):
        response = client.post("/automations", json=body, headers=api_user.headers)
        assert response.status_code == 422, body
        assert response.json()["errors"] == {"title": ["The title field is required."]}
    too_long = client.post("/automations", json={"title": "x" * 192}, headers=api_user.headers)
    assert too_long.status_code == 422
    assert list(too_long.json()["errors"]) == ["title"]
    assert client.get("/automations", headers=api_user.headers).json()["total"] == 0


def test_unknown_trigger_type_is_422(client: TestClient, api_user: ApiUser) -> None:
    newsletter = create_list(client, api_user)
    response = client.post(
        "/automations",
        json={"title": "x", "trigger_type": "join_list", "trigger_list_id": newsletter["id"]},
        headers=api_user.headers,
    )
    assert response.status_code == 422
    assert list(response.json()["errors"]) == ["trigger_type"]


def test_apply_list_needs_a_list_of_the_account(
    client: TestClient, api_user: ApiUser, make_user: Any
) -> None:
    theirs = create_list(client, make_user())
    gone = create_list(client, api_user, "Gone")
    assert client.delete(f"/lists/{gone['id']}", headers=api_user.headers).status_code == 200
    for body in (
        {"trigger_type": "apply_list"},
        {"trigger_type": "apply_list", "trigger_list_id": theirs["id"]},
        {"trigger_type": "apply_list", "trigger_list_id": gone["id"]},
        {"trigger_type": "apply_list", "trigger_list_id": 999999},
    ):
        response = client.post("/automations", json={"title": "x", **body}, headers=api_user.headers)
        assert response.status_code == 422, body
        assert list(response.json()["errors"]) == ["trigger_list_id"], body
    assert client.get("/automations", headers=api_user.headers).json()["total"] == 0


@pytest.mark.parametrize("trigger_type", ["open_campaign", "click_campaign"])
def test_campaign_triggers_need_a_campaign_of_the_account(
    client: TestClient, api_user: ApiUser, make_user: Any, trigger_type: str
) -> None:
    theirs = create_campaign(client, make_user())
    gone = create_campaign(client, api_user, title="Gone")
    assert client.delete(f"/campaigns/{gone['id']}", headers=api_user.headers).status_code == 200
    newsletter = create_list(client, api_user)
    for extra in (
        {},
        {"trigger_list_id": newsletter["id"]},
        {"trigger_campaign_id": theirs["id"]},
        {"trigger_campaign_id": gone["id"]},
        {"trigger_campaign_id": 999999},
    ):
        response = client.post(
            "/automations",
            json={"title": "x", "trigger_type": trigger_type, **extra},
            headers=api_user.headers,
        )
        assert response.status_code == 422, extra
        assert list(response.json()["errors"]) == ["trigger_campaign_id"], extra
    assert client.get("/automations", headers=api_user.headers).json()["total"] == 0


def test_trigger_target_without_a_type_is_422(client: TestClient, api_user: ApiUser) -> None:
    newsletter = create_list(client, api_user)
    response = client.post(
        "/automations", json={"title": "x", "trigger_list_id": newsletter["id"]}, headers=api_user.headers
    )
    assert response.status_code == 422
    assert list(response.json()["errors"]) == ["trigger_type"]


# ---------------------------------------------------------------------------------------------- GET


def test_get_automations_is_paginated_and_per_account(
    client: TestClient, api_user: ApiUser, make_user: Any
) -> None:
    first = create_automation(client, api_user, title="First")
    second = create_automation(client, api_user, title="Second")
    create_automation(client, make_user(), title="Not mine")
    gone = create_automation(client, api_user, title="Gone")
    assert client.delete(f"/automations/{gone['id']}", headers=api_user.headers).status_code == 200

    page = client.get("/automations", headers=api_user.headers).json()
    assert page["current_page"] == 1
    assert page["total"] == 2
    assert page["per_page"] == 100
    assert page["last_page"] == 1
    assert [a["id"] for a in page["data"]] == [first["id"], second["id"]]
    assert page["data"][0]["automation_triggers"] == []

    empty = client.get("/automations", params={"page": 2}, headers=api_user.headers).json()
    assert empty["current_page"] == 2
    assert empty["data"] == []
    assert empty["total"] == 2


def test_get_automations_lists_items_with_their_campaigns(client: TestClient, api_user: ApiUser) -> None:
    automation = create_automation(client, api_user)
    add_email(client, api_user, automation["id"], subject="One")
    add_email(client, api_user, automation["id"], subject="Two")
    [listed] = client.get("/automations", headers=api_user.headers).json()["data"]
    assert [i["campaign"]["subject"] for i in listed["automation_items"]] == ["One", "Two"]


def test_get_automation_404s(client: TestClient, api_user: ApiUser, make_user: Any) -> None:
    theirs = create_automation(client, make_user())
    assert client.get("/automations/999999", headers=api_user.headers).status_code == 404
    missing = client.get(f"/automations/{theirs['id']}", headers=api_user.headers)
    assert missing.status_code == 404
    assert missing.json()["message"]


def test_get_automation_includes_items_with_campaign_stats(
    client: TestClient, api_user: ApiUser, db: Session
) -> None:
    automation = create_automation(client, api_user)
    item = add_email(client, api_user, automation["id"])
    got = get_automation(client, api_user, automation["id"])
    [listed] = got["automation_items"]
    assert listed["id"] == item["id"]
    assert listed["campaign_id"] == item["campaign_id"]
    assert listed["campaign"]["id"] == item["campaign_id"]
    assert listed["campaign"]["subject"] == "Welcome aboard"
    assert listed["campaign"]["stats"]["sent_count"] == 0
    assert listed["campaign"]["stats"]["open_rate"] == 0.0

    now = utcnow()
    contacts = [
        Contact(account_id=api_user.account_id, email=f"r{i}@example.com", email_key=f"r{i}@example.com")
        for i in range(2)
    ]
    db.add_all(contacts)
    db.flush()
    db.add(
        Deliverable(
            account_id=api_user.account_id,
            campaign_id=item["campaign_id"],
            contact_id=contacts[0].id,
            state="sent",
            sent_at=now,
            opened_at=now,
        )
    )
    db.add(
        Deliverable(
            account_id=api_user.account_id,
            campaign_id=item["campaign_id"],
            contact_id=contacts[1].id,
            state="sent",
            sent_at=now,
        )
    )
    db.commit()
    stats = get_automation(client, api_user, automation["id"])["automation_items"][0]["campaign"]["stats"]
    assert stats["sent_count"] == 2
    assert stats["unique_open_count"] == 1
    assert stats["open_rate"] == 50.0
    assert stats["click_rate"] == 0.0


# ---------------------------------------------------------------------------------------------- PATCH


def test_patch_title_and_active(client: TestClient, api_user: ApiUser) -> None:
    automation = create_automation(client, api_user)
    response = client.patch(
        f"/automations/{automation['id']}",
        json={"title": "Onboarding", "active": True},
        headers=api_user.headers,
    )
    assert response.status_code == 200, response.text
    assert response.json()["title"] == "Onboarding"
    assert response.json()["active"] is True
    got = get_automation(client, api_user, automation["id"])
    assert (got["title"], got["active"]) == ("Onboarding", True)

    off = client.patch(f"/automations/{automation['id']}", json={"active": False}, headers=api_user.headers)
    assert off.json()["active"] is False
    assert off.json()["title"] == "Onboarding"


def test_patch_changes_the_trigger(client: TestClient, api_user: ApiUser) -> None:
    first_list = create_list(client, api_user, "First")
    second_list = create_list(client, api_user, "Second")
    campaign = create_campaign(client, api_user)
    automation = create_automation(
        client, api_user, trigger_type="apply_list", trigger_list_id=first_list["id"]
    )

    moved = client.patch(
        f"/automations/{automation['id']}",
        json={"trigger_list_id": second_list["id"]},
        headers=api_user.headers,
    )
    assert moved.status_code == 200, moved.text
    [trigger] = moved.json()["automation_triggers"]
    assert (trigger["type"], trigger["list_id"]) == ("apply_list", second_list["id"])

    switched = client.patch(
        f"/automations/{automation['id']}",
        json={"trigger_type": "click_campaign", "trigger_campaign_id": campaign["id"]},
        headers=api_user.headers,
    )
    assert switched.status_code == 200, switched.text
    [trigger] = switched.json()["automation_triggers"]
    assert trigger["type"] == "click_campaign"
    assert trigger["campaign_id"] == campaign["id"]
    assert trigger["list_id"] is None

    # A new trigger type does not carry the old target over: it needs its own.
    untargeted = client.patch(
        f"/automations/{automation['id']}", json={"trigger_type": "open_campaign"}, headers=api_user.headers
    )
    assert untargeted.status_code == 422
    assert list(untargeted.json()["errors"]) == ["trigger_campaign_id"]
    other_campaign = create_campaign(client, api_user, title="Other")
    retargeted = client.patch(
        f"/automations/{automation['id']}",
        json={"trigger_campaign_id": other_campaign["id"]},
        headers=api_user.headers,
    )
    assert retargeted.status_code == 200, retargeted.text
    [trigger] = retargeted.json()["automation_triggers"]
    assert (trigger["type"], trigger["campaign_id"]) == ("click_campaign", other_campaign["id"])
    retyped = client.patch(
        f"/automations/{automation['id']}",
        json={"trigger_type": "open_campaign", "trigger_campaign_id": campaign["id"]},
        headers=api_user.headers,
    )
    assert retyped.status_code == 200, retyped.text
    [trigger] = retyped.json()["automation_triggers"]
    assert (trigger["type"], trigger["campaign_id"]) == ("open_campaign", campaign["id"])
    assert get_automation(client, api_user, automation["id"])["automation_triggers"] == [trigger]
    # The first list is no longer in use, so it can be deleted.
    assert client.delete(f"/lists/{first_list['id']}", headers=api_user.headers).status_code == 200


def test_patch_adds_a_trigger_to_an_automation_without_one(client: TestClient, api_user: ApiUser) -> None:
    newsletter = create_list(client, api_user)
    automation = create_automation(client, api_user)
    response = client.patch(
        f"/automations/{automation['id']}",
        json={"trigger_type": "apply_list", "trigger_list_id": newsletter["id"]},
        headers=api_user.headers,
    )
    assert response.status_code == 200
    assert [t["list_id"] for t in response.json()["automation_triggers"]] == [newsletter["id"]]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"title": None}, "title"),
        ({"title": "x" * 192}, "title"),
        ({"active": "maybe"}, "active"),
        ({"trigger_type": "join_list"}, "trigger_type"),
        ({"trigger_type": "open_campaign"}, "trigger_campaign_id"),
        ({"trigger_list_id": 999999}, "trigger_list_id"),
    ],
)
def test_patch_validation_is_422(
    client: TestClient, api_user: ApiUser, body: dict[str, Any], field: str
) -> None:
    newsletter = create_list(client, api_user)
    automation = create_automation(
        client, api_user, trigger_type="apply_list", trigger_list_id=newsletter["id"]
    )
    response = client.patch(f"/automations/{automation['id']}", json=body, headers=api_user.headers)
    assert response.status_code == 422, response.text
    assert list(response.json()["errors"]) == [field]
    got = get_automation(client, api_user, automation["id"])
    assert got["title"] == "Welcome series"
    assert got["automation_triggers"] == automation["automation_triggers"]


def test_patch_foreign_or_unknown_automation_is_404(
    client: TestClient, api_user: ApiUser, make_user: Any
) -> None:
    other = make_user()
    theirs = create_automation(client, other)
    assert (
        client.patch(
            f"/automations/{theirs['id']}", json={"title": "Mine"}, headers=api_user.headers
        ).status_code
        == 404
    )
    assert (
        client.patch("/automations/999999", json={"title": "x"}, headers=api_user.headers).status_code == 404
    )
    assert get_automation(client, other, theirs["id"])["title"] == "Welcome series"


# ---------------------------------------------------------------------------------------------- DELETE


def test_delete_automation_deletes_its_emails_and_cancels_their_queue(
    client: TestClient, api_user: ApiUser, db: Session
) -> None:
    automation = create_automation(client, api_user)
    first = add_email(client, api_user, automation["id"], subject="One")
    second = add_email(client, api_user, automation["id"], subject="Two")
    other_automation = create_automation(client, api_user, title="Other")
    other_email = add_email(client, api_user, other_automation["id"], subject="Elsewhere")
    contact = Contact(account_id=api_user.account_id, email="r@example.com", email_key="r@example.com")
    db.add(contact)
    db.flush()
    queued = Deliverable(
        account_id=api_user.account_id,
        campaign_id=first["campaign_id"],
        contact_id=contact.id,
        state="queued",
    )
    sent = Deliverable(
        account_id=api_user.account_id,
        campaign_id=second["campaign_id"],
        contact_id=contact.id,
        state="sent",
        sent_at=utcnow(),
    )
    elsewhere = Deliverable(
        account_id=api_user.account_id,
        campaign_id=other_email["campaign_id"],
        contact_id=contact.id,
        state="queued",
    )
    db.add_all([queued, sent, elsewhere])
    db.commit()

    response = client.delete(f"/automations/{automation['id']}", headers=api_user.headers)
    assert response.status_code == 200
    assert response.json()["message"]
    assert client.get(f"/automations/{automation['id']}", headers=api_user.headers).status_code == 404
    assert client.delete(f"/automations/{automation['id']}", headers=api_user.headers).status_code == 404
    assert (
        client.patch(
            f"/automations/{automation['id']}", json={"title": "x"}, headers=api_user.headers
        ).status_code
        == 404
    )
    assert (
        client.post(
            f"/automations/{automation['id']}/emails", json=email_body(), headers=api_user.headers
        ).status_code
        == 404
    )
    assert (
        client.patch(
            f"/automation-emails/{first['id']}", json={"subject": "x"}, headers=api_user.headers
        ).status_code
        == 404
    )
    assert [a["id"] for a in client.get("/automations", headers=api_user.headers).json()["data"]] == [
        other_automation["id"]
    ]

    db.expire_all()
    campaigns = {
        c.id: c
        for c in db.scalars(
            select(Campaign).where(
                Campaign.id.in_([first["campaign_id"], second["campaign_id"], other_email["campaign_id"]])
            )
        )
    }
    assert campaigns[first["campaign_id"]].deleted_at is not None
    assert campaigns[second["campaign_id"]].deleted_at is not None
    assert campaigns[other_email["campaign_id"]].deleted_at is None
    assert client.get(f"/campaigns/{first['campaign_id']}", headers=api_user.headers).status_code == 404
    states = {
        d.id: d.state for d in db.scalars(select(Deliverable).where(Deliverable.contact_id == contact.id))
    }
    assert states == {queued.id: "cancelled", sent.id: "sent", elsewhere.id: "queued"}


def test_delete_foreign_automation_is_404(client: TestClient, api_user: ApiUser, make_user: Any) -> None:
    other = make_user()
    theirs = create_automation(client, other)
    assert client.delete(f"/automations/{theirs['id']}", headers=api_user.headers).status_code == 404
    assert client.delete("/automations/999999", headers=api_user.headers).status_code == 404
    assert client.get(f"/automations/{theirs['id']}", headers=other.headers).status_code == 200


def test_deleted_automation_frees_its_trigger_list(client: TestClient, api_user: ApiUser) -> None:
    newsletter = create_list(client, api_user)
    automation = create_automation(
        client, api_user, trigger_type="apply_list", trigger_list_id=newsletter["id"]
    )
    assert client.delete(f"/lists/{newsletter['id']}", headers=api_user.headers).status_code == 409
    assert client.delete(f"/automations/{automation['id']}", headers=api_user.headers).status_code == 200
    assert client.delete(f"/lists/{newsletter['id']}", headers=api_user.headers).status_code == 200


# ---------------------------------------------------------------------------------------------- emails


def test_add_emails_numbers_them_and_defaults_the_delay(client: TestClient, api_user: ApiUser) -> None:
    automation = create_automation(client, api_user)
    response = client.post(
        f"/automations/{automation['id']}/emails", json=email_body(subject="One"), headers=api_user.headers
    )
    assert response.status_code == 201, response.text
    first = response.json()
    assert first["automation_id"] == automation["id"]
    assert first["delay_hours"] == 0
    assert first["send_order"] == 1
    assert first["campaign_id"] == first["campaign"]["id"]
    assert first["campaign"]["subject"] == "One"
    assert first["campaign"]["title"] == "One"
    assert first["campaign"]["html"] == "<p>Glad you are here</p>"
    assert first["campaign"]["from_name"] == "Ann"
    assert first["campaign"]["from_email"] == "ann@example.com"
    assert first["campaign"]["scheduled_at"] is None
    assert first["campaign"]["sent_at"] is None
    assert first["created_at"].endswith("Z")

    second = add_email(client, api_user, automation["id"], subject="Two")
    assert (second["delay_hours"], second["send_order"]) == (24, 2)
    third = add_email(client, api_user, automation["id"], subject="Three", delay_hours=5)
    assert (third["delay_hours"], third["send_order"]) == (5, 3)

    items = get_automation(client, api_user, automation["id"])["automation_items"]
    assert [(i["id"], i["send_order"], i["delay_hours"]) for i in items] == [
        (first["id"], 1, 0),
        (second["id"], 2, 24),
        (third["id"], 3, 5),
    ]


def test_first_email_may_have_an_explicit_delay(client: TestClient, api_user: ApiUser) -> None:
    automation = create_automation(client, api_user)
    assert add_email(client, api_user, automation["id"], delay_hours=12)["delay_hours"] == 12
    assert add_email(client, api_user, automation["id"], delay_hours=0)["delay_hours"] == 0


def test_automation_emails_never_appear_in_get_campaigns(client: TestClient, api_user: ApiUser) -> None:
    regular = create_campaign(client, api_user)
    automation = create_automation(client, api_user)
    item = add_email(client, api_user, automation["id"])
    page = client.get("/campaigns", headers=api_user.headers).json()
    assert page["total"] == 1
    assert [c["id"] for c in page["data"]] == [regular["id"]]
    assert item["campaign_id"] != regular["id"]


@pytest.mark.parametrize("delay", [0, 5000])
def test_delay_hours_bounds_are_accepted(client: TestClient, api_user: ApiUser, delay: int) -> None:
    automation = create_automation(client, api_user)
    assert add_email(client, api_user, automation["id"], delay_hours=delay)["delay_hours"] == delay


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"delay_hours": -1}, "delay_hours"),
        ({"delay_hours": 5001}, "delay_hours"),
        ({"delay_hours": "soon"}, "delay_hours"),
        ({"subject": "RE: following up"}, "subject"),
        ({"subject": "Fwd: have a look"}, "subject"),
        ({"subject": "x" * 192}, "subject"),
        ({"from_email": "not-an-email"}, "from_email"),
        ({"from_name": "x" * 192}, "from_name"),
        ({"html": "x" * 1_000_001}, "html"),
        ({"subject": None}, "subject"),
        ({"html": None}, "html"),
        ({"from_name": None}, "from_name"),
        ({"from_email": None}, "from_email"),
    ],
)
def test_add_email_validation_is_422(
    client: TestClient, api_user: ApiUser, overrides: dict[str, Any], field: str
) -> None:
    automation = create_automation(client, api_user)
    body = {k: v for k, v in email_body(**overrides).items() if v is not None}
    response = client.post(f"/automations/{automation['id']}/emails", json=body, headers=api_user.headers)
    assert response.status_code == 422, response.text
    assert list(response.json()["errors"]) == [field]
    assert get_automation(client, api_user, automation["id"])["automation_items"] == []


def test_add_email_to_foreign_or_unknown_automation_is_404(
    client: TestClient, api_user: ApiUser, make_user: Any
) -> None:
    other = make_user()
    theirs = create_automation(client, other)
    response = client.post(f"/automations/{theirs['id']}/emails", json=email_body(), headers=api_user.headers)
    assert response.status_code == 404
    assert (
        client.post("/automations/999999/emails", json=email_body(), headers=api_user.headers).status_code
        == 404
    )
    assert get_automation(client, other, theirs["id"])["automation_items"] == []


# ---------------------------------------------------------------------------------------------- PATCH emails


def test_patch_email_edits_its_campaign(client: TestClient, api_user: ApiUser) -> None:
    automation = create_automation(client, api_user)
    item = add_email(client, api_user, automation["id"])
    response = client.patch(
        f"/automation-emails/{item['id']}",
        json={
            "subject": "Welcome, friend",
            "html": "<p>Edited</p>",
            "from_name": "Bob",
            "from_email": "bob@example.com",
            "delay_hours": 48,
        },
        headers=api_user.headers,
    )
    assert response.status_code == 200, response.text
    edited = response.json()
    assert edited["id"] == item["id"]
    assert edited["delay_hours"] == 48
    assert edited["send_order"] == 1
    assert edited["campaign"]["subject"] == "Welcome, friend"
    assert edited["campaign"]["title"] == "Welcome, friend"
    assert edited["campaign"]["html"] == "<p>Edited</p>"
    assert edited["campaign"]["from_name"] == "Bob"
    assert edited["campaign"]["from_email"] == "bob@example.com"
    [listed] = get_automation(client, api_user, automation["id"])["automation_items"]
    assert listed["delay_hours"] == 48
    assert listed["campaign"]["html"] == "<p>Edited</p>"
    campaign = client.get(f"/campaigns/{item['campaign_id']}", headers=api_user.headers).json()
    assert campaign["subject"] == "Welcome, friend"


def test_patch_email_keeps_what_is_not_given(client: TestClient, api_user: ApiUser) -> None:
    automation = create_automation(client, api_user)
    item = add_email(client, api_user, automation["id"], delay_hours=7)
    edited = client.patch(
        f"/automation-emails/{item['id']}", json={"html": "<p>Only html</p>"}, headers=api_user.headers
    ).json()
    assert edited["delay_hours"] == 7
    assert edited["campaign"]["subject"] == "Welcome aboard"
    assert edited["campaign"]["html"] == "<p>Only html</p>"


@pytest.mark.parametrize("delay", [0, 5000])
def test_patch_email_delay_bounds_are_accepted(client: TestClient, api_user: ApiUser, delay: int) -> None:
    automation = create_automation(client, api_user)
    item = add_email(client, api_user, automation["id"], delay_hours=3)
    response = client.patch(
        f"/automation-emails/{item['id']}", json={"delay_hours": delay}, headers=api_user.headers
    )
    assert response.status_code == 200
    assert response.json()["delay_hours"] == delay


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"delay_hours": -1}, "delay_hours"),
        ({"delay_hours": 5001}, "delay_hours"),
        ({"send_order": 0}, "send_order"),
        ({"send_order": -2}, "send_order"),
        ({"send_order": "first"}, "send_order"),
        ({"subject": "RE: again"}, "subject"),
        ({"subject": "fwd: again"}, "subject"),
        ({"subject": None}, "subject"),
        ({"html": ""}, "html"),
        ({"from_email": "nope"}, "from_email"),
        ({"from_name": "x" * 192}, "from_name"),
    ],
)
def test_patch_email_validation_is_422(
    client: TestClient, api_user: ApiUser, body: dict[str, Any], field: str
) -> None:
    automation = create_automation(client, api_user)
    item = add_email(client, api_user, automation["id"], delay_hours=3)
    response = client.patch(f"/automation-emails/{item['id']}", json=body, headers=api_user.headers)
    assert response.status_code == 422, response.text
    assert list(response.json()["errors"]) == [field]
    [listed] = get_automation(client, api_user, automation["id"])["automation_items"]
    assert listed["delay_hours"] == 3
    assert listed["send_order"] == 1
    assert listed["campaign"]["subject"] == "Welcome aboard"


def test_patch_send_order_moves_an_email_and_renumbers_the_rest(
    client: TestClient, api_user: ApiUser
) -> None:
    automation = create_automation(client, api_user)
    add_email(client, api_user, automation["id"], subject="A")
    b = add_email(client, api_user, automation["id"], subject="B")
    c = add_email(client, api_user, automation["id"], subject="C")
    d = add_email(client, api_user, automation["id"], subject="D")
    assert order_of(client, api_user, automation["id"]) == [("A", 1), ("B", 2), ("C", 3), ("D", 4)]

    moved = client.patch(f"/automation-emails/{d['id']}", json={"send_order": 1}, headers=api_user.headers)
    assert moved.status_code == 200, moved.text
    assert moved.json()["send_order"] == 1
    assert order_of(client, api_user, automation["id"]) == [("D", 1), ("A", 2), ("B", 3), ("C", 4)]

    client.patch(f"/automation-emails/{d['id']}", json={"send_order": 3}, headers=api_user.headers)
    assert order_of(client, api_user, automation["id"]) == [("A", 1), ("B", 2), ("D", 3), ("C", 4)]

    client.patch(f"/automation-emails/{b['id']}", json={"send_order": 4}, headers=api_user.headers)
    assert order_of(client, api_user, automation["id"]) == [("A", 1), ("D", 2), ("C", 3), ("B", 4)]

    # Past the end means last.
    last = client.patch(f"/automation-emails/{d['id']}", json={"send_order": 99}, headers=api_user.headers)
    assert last.json()["send_order"] == 4
    assert order_of(client, api_user, automation["id"]) == [("A", 1), ("C", 2), ("B", 3), ("D", 4)]

    # Its own place changes nothing.
    same = client.patch(f"/automation-emails/{c['id']}", json={"send_order": 2}, headers=api_user.headers)
    assert same.json()["send_order"] == 2
    assert order_of(client, api_user, automation["id"]) == [("A", 1), ("C", 2), ("B", 3), ("D", 4)]

    # A new email goes after the last one.
    e = add_email(client, api_user, automation["id"], subject="E")
    assert e["send_order"] == 5


def test_send_order_of_one_automation_leaves_another_alone(client: TestClient, api_user: ApiUser) -> None:
    first = create_automation(client, api_user, title="First")
    second = create_automation(client, api_user, title="Second")
    add_email(client, api_user, first["id"], subject="A")
    b = add_email(client, api_user, first["id"], subject="B")
    add_email(client, api_user, second["id"], subject="X")
    add_email(client, api_user, second["id"], subject="Y")
    client.patch(f"/automation-emails/{b['id']}", json={"send_order": 1}, headers=api_user.headers)
    assert order_of(client, api_user, first["id"]) == [("B", 1), ("A", 2)]
    assert order_of(client, api_user, second["id"]) == [("X", 1), ("Y", 2)]


def test_patch_unknown_or_foreign_email_is_404(client: TestClient, api_user: ApiUser, make_user: Any) -> None:
    other = make_user()
    theirs = create_automation(client, other)
    item = add_email(client, other, theirs["id"])
    response = client.patch(
        f"/automation-emails/{item['id']}", json={"subject": "Mine"}, headers=api_user.headers
    )
    assert response.status_code == 404
    assert response.json()["message"]
    assert (
        client.patch("/automation-emails/999999", json={"subject": "x"}, headers=api_user.headers).status_code
        == 404
    )
    [listed] = get_automation(client, other, theirs["id"])["automation_items"]
    assert listed["campaign"]["subject"] == "Welcome aboard"
