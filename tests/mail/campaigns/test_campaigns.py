"""The /campaigns routes: listing, create (draft or scheduled), read, edit, delete, send, stats, and the
list averages that follow from a campaign's deliverables."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session
from time_machine import TimeMachineFixture

from app.kit.time import utcnow
from app.models import Account, Campaign, CampaignList
from tests.conftest import ApiUser
from tests.factories import add_contacts, add_deliverable, campaign_body, create_campaign, create_list

# A valid address of 192 characters: one past the 191 limit.
LONG_EMAIL = "a" * 60 + "@" + ".".join(["b" * 60, "c" * 60, "d" * 10]) + ".example"
assert len(LONG_EMAIL) > 191


def parse_time(value: str) -> datetime:
    assert value.endswith("Z"), value
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def mark_sent(db: Session, campaign_id: int) -> None:
    campaign = db.get(Campaign, campaign_id)
    assert campaign is not None
    campaign.sent_at = utcnow()
    db.commit()


# ---------------------------------------------------------------------------------------------- GET list


def test_campaigns_need_authentication_and_a_paid_plan(client: TestClient, make_user: Any) -> None:
    assert client.get("/campaigns").status_code == 401
    assert client.post("/campaigns", json=campaign_body()).status_code == 401
    free = make_user(plan="free")
    assert client.get("/campaigns", headers=free.headers).status_code == 403
    assert client.post("/campaigns", json=campaign_body(), headers=free.headers).status_code == 403


def test_get_campaigns_starts_empty(client: TestClient, api_user: ApiUser) -> None:
    page = client.get("/campaigns", headers=api_user.headers).json()
    assert page["data"] == []
    assert page["total"] == 0
    assert page["current_page"] == 1
    assert page["per_page"] == 100


def test_get_campaigns_lists_own_campaigns_with_their_lists(
    client: TestClient, api_user: ApiUser, make_user: Any
) -> None:
    newsletter = create_list(client, api_user)
    first = create_campaign(client, api_user, title="First", lists=[newsletter["id"]])
    second = create_campaign(client, api_user, title="Second")
    other = make_user()
    create_campaign(client, other, title="Not mine")

    page = client.get("/campaigns", headers=api_user.headers).json()
    assert page["total"] == 2
    assert [c["id"] for c in page["data"]] == [first["id"], second["id"]]
    assert page["data"][0]["lists"] == [newsletter["id"]]
    assert page["data"][1]["lists"] == []
    assert page["data"][0]["title"] == "First"


def test_get_campaigns_pages_by_100_without_automation_emails_or_deleted_ones(
    client: TestClient, api_user: ApiUser, db: Session
) -> None:
    db.add_all(
        Campaign(
            account_id=api_user.account_id,
            title=f"Campaign {i:03}",
            subject="Hi",
            html="<p>x</p>",
            from_name="Ann",
            from_email="ann@example.com",
        )
        for i in range(101)
    )
    db.add(
        Campaign(
            account_id=api_user.account_id,
            title="Gone",
            subject="Hi",
            html="<p>x</p>",
            from_name="Ann",
            from_email="ann@example.com",
            deleted_at=utcnow(),
        )
    )
    db.commit()
    automation = client.post("/automations", json={"title": "Drip"}, headers=api_user.headers).json()
    email = client.post(
        f"/automations/{automation['id']}/emails",
        json={"subject": "Welcome", "html": "<p>hi</p>", "from_name": "Ann", "from_email": "ann@example.com"},
        headers=api_user.headers,
    )
    assert email.status_code == 201

    first = client.get("/campaigns", headers=api_user.headers).json()
    assert first["total"] == 101
    assert first["per_page"] == 100
    assert first["last_page"] == 2
    assert len(first["data"]) == 100
    assert first["data"][0]["title"] == "Campaign 000"

    second = client.get("/campaigns", params={"page": 2}, headers=api_user.headers).json()
    assert second["current_page"] == 2
    assert [c["title"] for c in second["data"]] == ["Campaign 100"]
    titles = {c["title"] for c in first["data"] + second["data"]}
    assert "Gone" not in titles
    assert "Welcome" not in titles
    assert email.json()["campaign_id"] not in {c["id"] for c in first["data"] + second["data"]}


# ---------------------------------------------------------------------------------------------- POST


def test_create_draft_campaign(client: TestClient, api_user: ApiUser) -> None:
    response = client.post("/campaigns", json=campaign_body(), headers=api_user.headers)
    assert response.status_code == 201
    created = response.json()
    assert created["title"] == "Spring news"
    assert created["subject"] == "What is new this spring"
    assert created["html"] == "<p>Hello there</p>"
    assert created["from_name"] == "Ann Sender"
    assert created["from_email"] == "ann@example.com"
    assert created["scheduled_at"] is None
    assert created["sent_at"] is None
    assert created["timezone"] == "UTC"
    assert created["lists"] == []
    assert isinstance(created["id"], int)
    parse_time(created["created_at"])
    parse_time(created["updated_at"])
    fetched = client.get(f"/campaigns/{created['id']}", headers=api_user.headers)
    assert fetched.json() == created


def test_create_campaign_reads_form_input(client: TestClient, api_user: ApiUser) -> None:
    newsletter = create_list(client, api_user)
    response = client.post(
        "/campaigns", data={**campaign_body(), "lists[]": str(newsletter["id"])}, headers=api_user.headers
    )
    assert response.status_code == 201, response.text
    assert response.json()["lists"] == [newsletter["id"]]


def test_create_scheduled_campaign_with_lists(client: TestClient, api_user: ApiUser) -> None:
    newsletter = create_list(client, api_user)
    extra = create_list(client, api_user, "Extra")
    response = client.post(
        "/campaigns",
        json=campaign_body(scheduled_at="2030-06-01T10:00:00Z", lists=[extra["id"], newsletter["id"]]),
        headers=api_user.headers,
    )
    assert response.status_code == 201, response.text
    created = response.json()
    assert parse_time(created["scheduled_at"]) == datetime(2030, 6, 1, 10, 0, tzinfo=UTC)
    assert created["sent_at"] is None
    assert sorted(created["lists"]) == sorted([newsletter["id"], extra["id"]])


def test_scheduling_without_lists_is_422(client: TestClient, api_user: ApiUser) -> None:
    response = client.post(
        "/campaigns", json=campaign_body(scheduled_at="2030-06-01T10:00:00Z"), headers=api_user.headers
    )
    assert response.status_code == 422
    assert "lists" in response.json()["errors"]
    assert client.get("/campaigns", headers=api_user.headers).json()["total"] == 0


@pytest.mark.parametrize("field", ["title", "subject", "html", "from_name", "from_email"])
def test_create_campaign_without_a_required_field_is_422(
    client: TestClient, api_user: ApiUser, field: str
) -> None:
    body = campaign_body()
    del body[field]
    response = client.post("/campaigns", json=body, headers=api_user.headers)
    assert response.status_code == 422
    label = field.replace("_", " ")
    assert response.json()["errors"] == {field: [f"The {label} field is required."]}
    assert response.json()["message"] == f"The {label} field is required."


def test_create_campaign_with_an_empty_body_lists_every_missing_field(
    client: TestClient, api_user: ApiUser
) -> None:
    response = client.post("/campaigns", json={}, headers=api_user.headers)
    assert response.status_code == 422
    assert set(response.json()["errors"]) == {"title", "subject", "html", "from_name", "from_email"}


@pytest.mark.parametrize("field", ["title", "subject", "html", "from_name", "from_email"])
def test_an_empty_or_blank_required_field_is_422_required(
    client: TestClient, api_user: ApiUser, field: str
) -> None:
    label = field.replace("_", " ")
    for value in ("", "   ", None):
        response = client.post("/campaigns", json=campaign_body(**{field: value}), headers=api_user.headers)
        assert response.status_code == 422, value
        assert response.json()["errors"] == {field: [f"The {label} field is required."]}, value


@pytest.mark.parametrize("field", ["title", "subject", "from_name"])
def test_text_fields_over_191_characters_are_422(client: TestClient, api_user: ApiUser, field: str) -> None:
    response = client.post("/campaigns", json=campaign_body(**{field: "x" * 192}), headers=api_user.headers)
    assert response.status_code == 422
    assert list(response.json()["errors"]) == [field]
    ok = client.post("/campaigns", json=campaign_body(**{field: "x" * 191}), headers=api_user.headers)
    assert ok.status_code == 201


def test_from_email_over_191_characters_is_422(client: TestClient, api_user: ApiUser) -> None:
    response = client.post("/campaigns", json=campaign_body(from_email=LONG_EMAIL), headers=api_user.headers)
    assert response.status_code == 422
    assert list(response.json()["errors"]) == ["from_email"]


@pytest.mark.parametrize("subject", ["RE: Your order", "re: your order", "Fwd: look", "FWD:look", "fWd: x"])
def test_subject_starting_with_re_or_fwd_is_422(client: TestClient, api_user: ApiUser, subject: str) -> None:
    response = client.post("/campaigns", json=campaign_body(subject=subject), headers=api_user.headers)
    assert response.status_code == 422
    assert response.json()["errors"] == {"subject": ["The subject field must not start with RE: or FWD:."]}


@pytest.mark.parametrize("subject", ["Reply soon", "Forward thinking", "About RE: things", "Re FWD"])
def test_subject_merely_containing_re_or_fwd_is_accepted(
    client: TestClient, api_user: ApiUser, subject: str
) -> None:
    assert create_campaign(client, api_user, subject=subject)["subject"] == subject


def test_html_limit_is_one_million_characters(client: TestClient, api_user: ApiUser) -> None:
    too_long = client.post("/campaigns", json=campaign_body(html="x" * 1_000_001), headers=api_user.headers)
    assert too_long.status_code == 422
    assert list(too_long.json()["errors"]) == ["html"]
    at_limit = client.post("/campaigns", json=campaign_body(html="x" * 1_000_000), headers=api_user.headers)
    assert at_limit.status_code == 201
    assert len(at_limit.json()["html"]) == 1_000_000


@pytest.mark.parametrize("address", ["not-an-email", "ann@", "@example.com", "ann example@example.com"])
def test_bad_from_email_is_422(client: TestClient, api_user: ApiUser, address: str) -> None:
    response = client.post("/campaigns", json=campaign_body(from_email=address), headers=api_user.headers)
    assert response.status_code == 422
    assert response.json()["errors"] == {
        "from_email": ["The from email field must be a valid email address."]
    }


def test_unknown_or_foreign_list_id_is_422(client: TestClient, api_user: ApiUser, make_user: Any) -> None:
    mine = create_list(client, api_user)
    theirs = create_list(client, make_user())
    response = client.post(
        "/campaigns", json=campaign_body(lists=[mine["id"], 999999, theirs["id"]]), headers=api_user.headers
    )
    assert response.status_code == 422
    assert set(response.json()["errors"]) == {"lists.1", "lists.2"}
    assert client.get("/campaigns", headers=api_user.headers).json()["total"] == 0


def test_deleted_list_id_is_422(client: TestClient, api_user: ApiUser) -> None:
    gone = create_list(client, api_user)
    assert client.delete(f"/lists/{gone['id']}", headers=api_user.headers).status_code == 200
    response = client.post("/campaigns", json=campaign_body(lists=[gone["id"]]), headers=api_user.headers)
    assert response.status_code == 422
    assert "lists.0" in response.json()["errors"]


def test_naive_scheduled_at_is_wall_clock_time_in_the_account_timezone(
    client: TestClient, make_user: Any
) -> None:
    oslo = make_user(timezone="Europe/Oslo")
    newsletter = create_list(client, oslo)
    summer = create_campaign(client, oslo, scheduled_at="2030-06-01T10:00:00", lists=[newsletter["id"]])
    assert summer["timezone"] == "Europe/Oslo"
    assert summer["scheduled_at"] == "2030-06-01T08:00:00.000000Z"
    winter = create_campaign(client, oslo, scheduled_at="2030-01-15T10:00:00", lists=[newsletter["id"]])
    assert winter["scheduled_at"] == "2030-01-15T09:00:00.000000Z"


def test_aware_scheduled_at_is_converted_to_utc(client: TestClient, make_user: Any) -> None:
    oslo = make_user(timezone="Europe/Oslo")
    newsletter = create_list(client, oslo)
    created = create_campaign(
        client, oslo, scheduled_at="2030-06-01T10:00:00+05:00", lists=[newsletter["id"]]
    )
    assert created["scheduled_at"] == "2030-06-01T05:00:00.000000Z"
    in_utc = create_campaign(client, oslo, scheduled_at="2030-06-01T10:00:00Z", lists=[newsletter["id"]])
    assert in_utc["scheduled_at"] == "2030-06-01T10:00:00.000000Z"


def test_campaign_timezone_overrides_the_account_timezone(client: TestClient, make_user: Any) -> None:
    oslo = make_user(timezone="Europe/Oslo")
    newsletter = create_list(client, oslo)
    created = create_campaign(
        client,
        oslo,
        timezone="America/New_York",
        scheduled_at="2030-06-01T10:00:00",
        lists=[newsletter["id"]],
    )
    assert created["timezone"] == "America/New_York"
    assert created["scheduled_at"] == "2030-06-01T14:00:00.000000Z"
    bad = client.post("/campaigns", json=campaign_body(timezone="Mars/Olympus"), headers=oslo.headers)
    assert bad.status_code == 422
    assert list(bad.json()["errors"]) == ["timezone"]


def test_scheduling_while_warming_up_is_403(client: TestClient, make_user: Any) -> None:
    warming = make_user(warmup_days=3)
    newsletter = create_list(client, warming)
    response = client.post(
        "/campaigns",
        json=campaign_body(scheduled_at="2030-06-01T10:00:00Z", lists=[newsletter["id"]]),
        headers=warming.headers,
    )
    assert response.status_code == 403
    assert "warming up" in response.json()["message"]
    assert client.get("/campaigns", headers=warming.headers).json()["total"] == 0
    # A draft is still allowed during warm-up.
    assert create_campaign(client, warming, lists=[newsletter["id"]])["scheduled_at"] is None


def test_scheduling_without_an_account_timezone_is_422(
    client: TestClient, api_user: ApiUser, db: Session
) -> None:
    account = db.get(Account, api_user.account_id)
    assert account is not None
    account.timezone = ""
    db.commit()
    newsletter = create_list(client, api_user)
    response = client.post(
        "/campaigns",
        json=campaign_body(scheduled_at="2030-06-01T10:00:00Z", lists=[newsletter["id"]]),
        headers=api_user.headers,
    )
    assert response.status_code == 422
    assert list(response.json()["errors"]) == ["timezone"]
    draft = create_campaign(client, api_user, lists=[newsletter["id"]])
    assert draft["timezone"] is None
    assert draft["scheduled_at"] is None


def test_draft_made_before_the_timezone_was_set_can_be_scheduled_after(
    client: TestClient, api_user: ApiUser, db: Session
) -> None:
    account = db.get(Account, api_user.account_id)
    assert account is not None
    account.timezone = ""
    db.commit()
    newsletter = create_list(client, api_user)
    draft = create_campaign(client, api_user, lists=[newsletter["id"]])
    refused = client.patch(
        f"/campaigns/{draft['id']}", json={"scheduled_at": "2030-06-01T10:00:00"}, headers=api_user.headers
    )
    assert refused.status_code == 422
    account.timezone = "Europe/Oslo"
    db.commit()
    response = client.patch(
        f"/campaigns/{draft['id']}", json={"scheduled_at": "2030-06-01T10:00:00"}, headers=api_user.headers
    )
    assert response.status_code == 200, response.text
    assert response.json()["scheduled_at"] == "2030-06-01T08:00:00.000000Z"
    assert response.json()["timezone"] == "Europe/Oslo"


# ---------------------------------------------------------------------------------------------- GET one


def test_get_campaign(client: TestClient, api_user: ApiUser, make_user: Any) -> None:
    newsletter = create_list(client, api_user)
    created = create_campaign(client, api_user, lists=[newsletter["id"]])
    response = client.get(f"/campaigns/{created['id']}", headers=api_user.headers)
    assert response.status_code == 200
    assert response.json()["lists"] == [newsletter["id"]]
    assert response.json()["title"] == "Spring news"

    assert client.get("/campaigns/999999", headers=api_user.headers).status_code == 404
    other = make_user()
    missing = client.get(f"/campaigns/{created['id']}", headers=other.headers)
    assert missing.status_code == 404
    assert missing.json()["message"]


def test_campaign_lists_leave_out_deleted_lists(client: TestClient, api_user: ApiUser) -> None:
    kept = create_list(client, api_user, "Kept")
    gone = create_list(client, api_user, "Gone")
    created = create_campaign(client, api_user, lists=[kept["id"], gone["id"]])
    assert client.delete(f"/lists/{gone['id']}", headers=api_user.headers).status_code == 200
    assert client.get(f"/campaigns/{created['id']}", headers=api_user.headers).json()["lists"] == [kept["id"]]


# ---------------------------------------------------------------------------------------------- PATCH


def test_patch_edits_the_given_fields_only(client: TestClient, api_user: ApiUser) -> None:
    created = create_campaign(client, api_user)
    response = client.patch(
        f"/campaigns/{created['id']}",
        json={"title": "Summer news", "subject": "Hot off the press", "html": "<p>New</p>"},
        headers=api_user.headers,
    )
    assert response.status_code == 200, response.text
    edited = response.json()
    assert edited["title"] == "Summer news"
    assert edited["subject"] == "Hot off the press"
    assert edited["html"] == "<p>New</p>"
    assert edited["from_name"] == "Ann Sender"
    assert edited["from_email"] == "ann@example.com"
    assert parse_time(edited["updated_at"]) >= parse_time(created["updated_at"])
    assert client.get(f"/campaigns/{created['id']}", headers=api_user.headers).json() == edited

    more = client.patch(
        f"/campaigns/{created['id']}",
        json={"from_name": "Bob", "from_email": "bob@example.com"},
        headers=api_user.headers,
    ).json()
    assert (more["from_name"], more["from_email"], more["title"]) == ("Bob", "bob@example.com", "Summer news")


def test_patch_scheduled_at_null_makes_a_scheduled_campaign_a_draft(
    client: TestClient, api_user: ApiUser
) -> None:
    newsletter = create_list(client, api_user)
    scheduled = create_campaign(
        client, api_user, scheduled_at="2030-06-01T10:00:00Z", lists=[newsletter["id"]]
    )
    response = client.patch(
        f"/campaigns/{scheduled['id']}", json={"scheduled_at": None}, headers=api_user.headers
    )
    assert response.status_code == 200
    assert response.json()["scheduled_at"] is None
    assert response.json()["lists"] == [newsletter["id"]]
    # As a draft again it can be sent.
    assert client.post(f"/campaigns/{scheduled['id']}/send", headers=api_user.headers).status_code == 200


def test_patch_scheduled_at_schedules_a_draft_with_lists(client: TestClient, api_user: ApiUser) -> None:
    newsletter = create_list(client, api_user)
    draft = create_campaign(client, api_user, lists=[newsletter["id"]])
    response = client.patch(
        f"/campaigns/{draft['id']}", json={"scheduled_at": "2031-02-03T04:05:06Z"}, headers=api_user.headers
    )
    assert response.status_code == 200, response.text
    assert response.json()["scheduled_at"] == "2031-02-03T04:05:06.000000Z"
    fetched = client.get(f"/campaigns/{draft['id']}", headers=api_user.headers).json()
    assert fetched["scheduled_at"] == "2031-02-03T04:05:06.000000Z"


def test_patch_scheduled_at_and_lists_together_schedules_a_draft(
    client: TestClient, api_user: ApiUser
) -> None:
    newsletter = create_list(client, api_user)
    draft = create_campaign(client, api_user)
    response = client.patch(
        f"/campaigns/{draft['id']}",
        json={"scheduled_at": "2031-02-03T04:05:06Z", "lists": [newsletter["id"]]},
        headers=api_user.headers,
    )
    assert response.status_code == 200, response.text
    assert response.json()["lists"] == [newsletter["id"]]
    assert response.json()["scheduled_at"] == "2031-02-03T04:05:06.000000Z"


def test_patch_scheduled_at_on_a_draft_without_lists_is_422(client: TestClient, api_user: ApiUser) -> None:
    draft = create_campaign(client, api_user)
    response = client.patch(
        f"/campaigns/{draft['id']}", json={"scheduled_at": "2031-02-03T04:05:06Z"}, headers=api_user.headers
    )
    assert response.status_code == 422
    assert "lists" in response.json()["errors"]
    assert client.get(f"/campaigns/{draft['id']}", headers=api_user.headers).json()["scheduled_at"] is None


def test_patch_scheduled_at_while_warming_up_is_403(client: TestClient, make_user: Any) -> None:
    warming = make_user(warmup_days=3)
    newsletter = create_list(client, warming)
    draft = create_campaign(client, warming, lists=[newsletter["id"]])
    response = client.patch(
        f"/campaigns/{draft['id']}", json={"scheduled_at": "2031-02-03T04:05:06Z"}, headers=warming.headers
    )
    assert response.status_code == 403
    assert client.get(f"/campaigns/{draft['id']}", headers=warming.headers).json()["scheduled_at"] is None


def test_patch_naive_scheduled_at_uses_the_account_timezone(client: TestClient, make_user: Any) -> None:
    oslo = make_user(timezone="Europe/Oslo")
    newsletter = create_list(client, oslo)
    draft = create_campaign(client, oslo, lists=[newsletter["id"]])
    response = client.patch(
        f"/campaigns/{draft['id']}", json={"scheduled_at": "2030-12-24T18:00:00"}, headers=oslo.headers
    )
    assert response.json()["scheduled_at"] == "2030-12-24T17:00:00.000000Z"


def test_patch_lists_replaces_the_assignments(client: TestClient, api_user: ApiUser) -> None:
    a = create_list(client, api_user, "A")
    b = create_list(client, api_user, "B")
    c = create_list(client, api_user, "C")
    created = create_campaign(client, api_user, lists=[a["id"], b["id"]])
    response = client.patch(
        f"/campaigns/{created['id']}", json={"lists": [c["id"]]}, headers=api_user.headers
    )
    assert response.status_code == 200
    assert response.json()["lists"] == [c["id"]]
    assert client.get(f"/campaigns/{created['id']}", headers=api_user.headers).json()["lists"] == [c["id"]]
    cleared = client.patch(f"/campaigns/{created['id']}", json={"lists": []}, headers=api_user.headers)
    assert cleared.status_code == 200
    assert cleared.json()["lists"] == []


def test_patch_lists_to_none_on_a_scheduled_campaign_is_422(client: TestClient, api_user: ApiUser) -> None:
    newsletter = create_list(client, api_user)
    scheduled = create_campaign(
        client, api_user, scheduled_at="2030-06-01T10:00:00Z", lists=[newsletter["id"]]
    )
    response = client.patch(f"/campaigns/{scheduled['id']}", json={"lists": []}, headers=api_user.headers)
    assert response.status_code == 422
    assert "lists" in response.json()["errors"]
    fetched = client.get(f"/campaigns/{scheduled['id']}", headers=api_user.headers).json()
    assert fetched["lists"] == [newsletter["id"]]


def test_patch_with_a_foreign_list_is_422(client: TestClient, api_user: ApiUser, make_user: Any) -> None:
    created = create_campaign(client, api_user)
    theirs = create_list(client, make_user())
    response = client.patch(
        f"/campaigns/{created['id']}", json={"lists": [theirs["id"]]}, headers=api_user.headers
    )
    assert response.status_code == 422
    assert "lists.0" in response.json()["errors"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"subject": "RE: hello"}, "subject"),
        ({"subject": "fwd: hello"}, "subject"),
        ({"title": "x" * 192}, "title"),
        ({"subject": "x" * 192}, "subject"),
        ({"from_name": "x" * 192}, "from_name"),
        ({"from_email": "nope"}, "from_email"),
        ({"from_email": LONG_EMAIL}, "from_email"),
        ({"html": "x" * 1_000_001}, "html"),
        ({"title": None}, "title"),
        ({"html": ""}, "html"),
        ({"scheduled_at": "next tuesday"}, "scheduled_at"),
    ],
)
def test_patch_validation_is_422(
    client: TestClient, api_user: ApiUser, body: dict[str, Any], field: str
) -> None:
    created = create_campaign(client, api_user)
    response = client.patch(f"/campaigns/{created['id']}", json=body, headers=api_user.headers)
    assert response.status_code == 422
    assert list(response.json()["errors"]) == [field]
    assert client.get(f"/campaigns/{created['id']}", headers=api_user.headers).json() == created


def test_patch_unknown_or_foreign_campaign_is_404(
    client: TestClient, api_user: ApiUser, make_user: Any
) -> None:
    created = create_campaign(client, api_user)
    other = make_user()
    assert client.patch("/campaigns/999999", json={"title": "x"}, headers=api_user.headers).status_code == 404
    assert (
        client.patch(f"/campaigns/{created['id']}", json={"title": "x"}, headers=other.headers).status_code
        == 404
    )
    assert (
        client.get(f"/campaigns/{created['id']}", headers=api_user.headers).json()["title"] == "Spring news"
    )


def test_sent_campaign_cannot_be_patched(client: TestClient, api_user: ApiUser, db: Session) -> None:
    newsletter = create_list(client, api_user)
    created = create_campaign(client, api_user, lists=[newsletter["id"]])
    mark_sent(db, created["id"])
    for body in ({"title": "Too late"}, {"scheduled_at": None}, {"lists": []}, {"subject": "RE: x"}):
        response = client.patch(f"/campaigns/{created['id']}", json=body, headers=api_user.headers)
        assert response.status_code == 409, body
        assert response.json()["message"]
    fetched = client.get(f"/campaigns/{created['id']}", headers=api_user.headers).json()
    assert fetched["title"] == "Spring news"
    assert fetched["sent_at"] is not None
    assert fetched["lists"] == [newsletter["id"]]


# ---------------------------------------------------------------------------------------------- DELETE


def test_delete_campaign(client: TestClient, api_user: ApiUser, db: Session) -> None:
    created = create_campaign(client, api_user)
    kept = create_campaign(client, api_user, title="Kept")
    response = client.delete(f"/campaigns/{created['id']}", headers=api_user.headers)
    assert response.status_code == 200
    assert response.json()["message"]
    assert client.get(f"/campaigns/{created['id']}", headers=api_user.headers).status_code == 404
    assert client.delete(f"/campaigns/{created['id']}", headers=api_user.headers).status_code == 404
    assert (
        client.patch(f"/campaigns/{created['id']}", json={"title": "x"}, headers=api_user.headers).status_code
        == 404
    )
    assert client.post(f"/campaigns/{created['id']}/send", headers=api_user.headers).status_code == 404
    page = client.get("/campaigns", headers=api_user.headers).json()
    assert [c["id"] for c in page["data"]] == [kept["id"]]
    # Soft delete: the row is still there.
    db.expire_all()
    row = db.get(Campaign, created["id"])
    assert row is not None
    assert row.deleted_at is not None


def test_delete_sent_campaign_is_409(client: TestClient, api_user: ApiUser, db: Session) -> None:
    created = create_campaign(client, api_user)
    mark_sent(db, created["id"])
    response = client.delete(f"/campaigns/{created['id']}", headers=api_user.headers)
    assert response.status_code == 409
    assert client.get(f"/campaigns/{created['id']}", headers=api_user.headers).status_code == 200


def test_delete_foreign_campaign_is_404(client: TestClient, api_user: ApiUser, make_user: Any) -> None:
    created = create_campaign(client, api_user)
    assert client.delete(f"/campaigns/{created['id']}", headers=make_user().headers).status_code == 404
    assert client.delete("/campaigns/999999", headers=api_user.headers).status_code == 404
    assert client.get(f"/campaigns/{created['id']}", headers=api_user.headers).status_code == 200


# ---------------------------------------------------------------------------------------------- send


def test_send_schedules_the_campaign_now(client: TestClient, api_user: ApiUser) -> None:
    newsletter = create_list(client, api_user)
    draft = create_campaign(client, api_user, lists=[newsletter["id"]])
    before = datetime.now(UTC)
    response = client.post(f"/campaigns/{draft['id']}/send", headers=api_user.headers)
    after = datetime.now(UTC)
    assert response.status_code == 200, response.text
    sent = response.json()
    assert sent["id"] == draft["id"]
    assert sent["sent_at"] is None
    scheduled_at = parse_time(sent["scheduled_at"])
    assert before - timedelta(seconds=1) <= scheduled_at <= after + timedelta(seconds=1)
    assert (
        client.get(f"/campaigns/{draft['id']}", headers=api_user.headers).json()["scheduled_at"]
        == (sent["scheduled_at"])
    )


def test_send_without_lists_is_400(client: TestClient, api_user: ApiUser) -> None:
    draft = create_campaign(client, api_user)
    response = client.post(f"/campaigns/{draft['id']}/send", headers=api_user.headers)
    assert response.status_code == 400
    assert response.json()["message"]
    assert client.get(f"/campaigns/{draft['id']}", headers=api_user.headers).json()["scheduled_at"] is None


def test_send_with_only_deleted_lists_is_400(client: TestClient, api_user: ApiUser) -> None:
    gone = create_list(client, api_user)
    draft = create_campaign(client, api_user, lists=[gone["id"]])
    assert client.delete(f"/lists/{gone['id']}", headers=api_user.headers).status_code == 200
    assert client.post(f"/campaigns/{draft['id']}/send", headers=api_user.headers).status_code == 400


def test_send_while_warming_up_is_403(client: TestClient, make_user: Any) -> None:
    warming = make_user(warmup_days=3)
    newsletter = create_list(client, warming)
    draft = create_campaign(client, warming, lists=[newsletter["id"]])
    response = client.post(f"/campaigns/{draft['id']}/send", headers=warming.headers)
    assert response.status_code == 403
    assert "warming up" in response.json()["message"]
    assert client.get(f"/campaigns/{draft['id']}", headers=warming.headers).json()["scheduled_at"] is None


def test_send_after_warm_up_ended_is_allowed(client: TestClient, make_user: Any, db: Session) -> None:
    warming = make_user(warmup_days=3)
    newsletter = create_list(client, warming)
    draft = create_campaign(client, warming, lists=[newsletter["id"]])
    account = db.get(Account, warming.account_id)
    assert account is not None
    account.warmup_until = utcnow() - timedelta(minutes=1)
    db.commit()
    assert client.post(f"/campaigns/{draft['id']}/send", headers=warming.headers).status_code == 200


@pytest.mark.parametrize(
    ("made", "opens"),
    [
        # The account's 14 January ends at 08:00 UTC (Los Angeles is UTC-8 in winter). Made in its last
        # second, the warm-up takes three whole days of the account's calendar and ends at its midnight.
        ("2030-01-15T07:59:59Z", "2030-01-18T08:00:00Z"),
        ("2030-01-15T08:00:00Z", "2030-01-18T08:00:00Z"),
        ("2030-01-15T08:00:01Z", "2030-01-19T08:00:00Z"),
    ],
)
def test_warm_up_counts_whole_days_of_the_accounts_time_zone(
    client: TestClient, make_user: Any, clock: TimeMachineFixture, made: str, opens: str
) -> None:
    clock.move_to(datetime.fromisoformat(made), tick=False)
    warming = make_user(warmup_days=3, timezone="America/Los_Angeles")
    newsletter = create_list(client, warming)
    draft = create_campaign(client, warming, lists=[newsletter["id"]])
    clock.move_to(datetime.fromisoformat(opens) - timedelta(seconds=1), tick=False)
    response = client.post(f"/campaigns/{draft['id']}/send", headers=warming.headers)
    assert response.status_code == 403
    assert response.json()["message"] == (
        f"Your account is warming up: sending and scheduling open at {opens[:-1]}.000000Z."
    )
    clock.move_to(datetime.fromisoformat(opens), tick=False)
    assert client.post(f"/campaigns/{draft['id']}/send", headers=warming.headers).status_code == 200


def test_send_an_already_scheduled_campaign_is_409(client: TestClient, api_user: ApiUser) -> None:
    newsletter = create_list(client, api_user)
    scheduled = create_campaign(
        client, api_user, scheduled_at="2030-06-01T10:00:00Z", lists=[newsletter["id"]]
    )
    response = client.post(f"/campaigns/{scheduled['id']}/send", headers=api_user.headers)
    assert response.status_code == 409
    assert client.get(f"/campaigns/{scheduled['id']}", headers=api_user.headers).json()["scheduled_at"] == (
        "2030-06-01T10:00:00.000000Z"
    )
    draft = create_campaign(client, api_user, lists=[newsletter["id"]])
    assert client.post(f"/campaigns/{draft['id']}/send", headers=api_user.headers).status_code == 200
    assert client.post(f"/campaigns/{draft['id']}/send", headers=api_user.headers).status_code == 409


def test_send_an_already_sent_campaign_is_409(client: TestClient, api_user: ApiUser, db: Session) -> None:
    newsletter = create_list(client, api_user)
    draft = create_campaign(client, api_user, lists=[newsletter["id"]])
    mark_sent(db, draft["id"])
    response = client.post(f"/campaigns/{draft['id']}/send", headers=api_user.headers)
    assert response.status_code == 409
    assert client.get(f"/campaigns/{draft['id']}", headers=api_user.headers).json()["scheduled_at"] is None


def test_send_unknown_or_foreign_campaign_is_404(
    client: TestClient, api_user: ApiUser, make_user: Any
) -> None:
    newsletter = create_list(client, api_user)
    draft = create_campaign(client, api_user, lists=[newsletter["id"]])
    assert client.post(f"/campaigns/{draft['id']}/send", headers=make_user().headers).status_code == 404
    assert client.post("/campaigns/999999/send", headers=api_user.headers).status_code == 404
    assert client.get(f"/campaigns/{draft['id']}", headers=api_user.headers).json()["scheduled_at"] is None


def test_automation_emails_cannot_be_edited_deleted_or_sent_as_campaigns(
    client: TestClient, api_user: ApiUser
) -> None:
    automation = client.post("/automations", json={"title": "Drip"}, headers=api_user.headers).json()
    item = client.post(
        f"/automations/{automation['id']}/emails",
        json={"subject": "Welcome", "html": "<p>hi</p>", "from_name": "Ann", "from_email": "ann@example.com"},
        headers=api_user.headers,
    ).json()
    campaign_id = item["campaign_id"]
    assert (
        client.patch(f"/campaigns/{campaign_id}", json={"title": "x"}, headers=api_user.headers).status_code
        == 404
    )
    assert client.delete(f"/campaigns/{campaign_id}", headers=api_user.headers).status_code == 404
    assert client.post(f"/campaigns/{campaign_id}/send", headers=api_user.headers).status_code == 404
    assert client.get(f"/campaigns/{campaign_id}/stats", headers=api_user.headers).status_code == 200


# ---------------------------------------------------------------------------------------------- stats


ZERO_STATS = {
    "sent_count": 0,
    "unique_open_count": 0,
    "unique_click_count": 0,
    "unsubscribe_count": 0,
    "bounce_count": 0,
    "spam_count": 0,
    "open_rate": 0.0,
    "click_rate": 0.0,
    "unsubscribe_rate": 0.0,
    "bounce_rate": 0.0,
    "spam_rate": 0.0,
}
# Beyond SendFox: where sending stands (a draft has nothing queued).
DRAFT_TOTALS = {
    "sending_state": "draft",
    "recipients_total": 0,
    "pending_count": 0,
    "failed_count": 0,
    "cancelled_count": 0,
}


def test_stats_of_a_new_campaign_are_zero(client: TestClient, api_user: ApiUser) -> None:
    created = create_campaign(client, api_user)
    response = client.get(f"/campaigns/{created['id']}/stats", headers=api_user.headers)
    assert response.status_code == 200
    stats = response.json()
    assert stats == {**ZERO_STATS, **DRAFT_TOTALS}
    assert all(isinstance(stats[k], float) for k in stats if k.endswith("_rate"))


def test_stats_count_deliverables(client: TestClient, api_user: ApiUser, db: Session) -> None:
    created = create_campaign(client, api_user)
    other_campaign = create_campaign(client, api_user, title="Other")
    now = utcnow()
    a, b, c, d = add_contacts(db, api_user.account_id, 4)
    add_deliverable(db, api_user.account_id, created["id"], a, state="sent", sent_at=now, opened_at=now,
                    clicked_at=now)  # fmt: skip
    add_deliverable(db, api_user.account_id, created["id"], b, state="sent", sent_at=now, opened_at=now,
                    unsubscribed_at=now)  # fmt: skip
    add_deliverable(db, api_user.account_id, created["id"], c, state="sent", sent_at=now, spam_at=now)
    add_deliverable(db, api_user.account_id, created["id"], d, state="queued")
    add_deliverable(
        db, api_user.account_id, other_campaign["id"], a, state="sent", sent_at=now, bounced_at=now
    )
    db.commit()

    stats = client.get(f"/campaigns/{created['id']}/stats", headers=api_user.headers).json()
    assert stats == {
        "sent_count": 3,
        "unique_open_count": 2,
        "unique_click_count": 1,
        "unsubscribe_count": 1,
        "bounce_count": 0,
        "spam_count": 1,
        "open_rate": 66.67,
        "click_rate": 33.33,
        "unsubscribe_rate": 33.33,
        "bounce_rate": 0.0,
        "spam_rate": 33.33,
        "sending_state": "sending",
        "recipients_total": 4,
        "pending_count": 1,
        "failed_count": 0,
        "cancelled_count": 0,
    }
    other = client.get(f"/campaigns/{other_campaign['id']}/stats", headers=api_user.headers).json()
    assert other["sent_count"] == 1
    assert other["bounce_count"] == 1
    assert other["bounce_rate"] == 100.0
    assert other["open_rate"] == 0.0


def test_stats_of_unknown_or_foreign_campaign_is_404(
    client: TestClient, api_user: ApiUser, make_user: Any
) -> None:
    created = create_campaign(client, api_user)
    assert client.get(f"/campaigns/{created['id']}/stats", headers=make_user().headers).status_code == 404
    assert client.get("/campaigns/999999/stats", headers=api_user.headers).status_code == 404
    client.delete(f"/campaigns/{created['id']}", headers=api_user.headers)
    assert client.get(f"/campaigns/{created['id']}/stats", headers=api_user.headers).status_code == 404


# ---------------------------------------------------------------------------------------------- list averages


def test_list_averages_follow_deliverables(client: TestClient, api_user: ApiUser, db: Session) -> None:
    newsletter = create_list(client, api_user, "Newsletter")
    partners = create_list(client, api_user, "Partners")
    quiet = create_list(client, api_user, "Quiet")
    first = create_campaign(client, api_user, title="First", lists=[newsletter["id"]])
    second = create_campaign(client, api_user, title="Second", lists=[newsletter["id"], partners["id"]])
    unsent = create_campaign(client, api_user, title="Unsent", lists=[newsletter["id"]])
    deleted = create_campaign(client, api_user, title="Deleted", lists=[newsletter["id"]])
    now = utcnow()
    contacts = add_contacts(db, api_user.account_id, 4)
    # First: 2 sent, 1 opened, none clicked -> 50% open, 0% click.
    add_deliverable(
        db, api_user.account_id, first["id"], contacts[0], state="sent", sent_at=now, opened_at=now
    )
    add_deliverable(db, api_user.account_id, first["id"], contacts[1], state="sent", sent_at=now)
    # Second: 4 sent, 1 opened and clicked -> 25% open, 25% click.
    for i, contact_id in enumerate(contacts):
        opened = now if i == 0 else None
        add_deliverable(
            db,
            api_user.account_id,
            second["id"],
            contact_id,
            state="sent",
            sent_at=now,
            opened_at=opened,
            clicked_at=opened,
        )
    # Unsent: only queued rows, left out of the average.
    add_deliverable(db, api_user.account_id, unsent["id"], contacts[0], state="queued")
    # Deleted: 1 sent, 1 opened; left out once the campaign is deleted.
    add_deliverable(
        db, api_user.account_id, deleted["id"], contacts[0], state="sent", sent_at=now, opened_at=now
    )
    db.commit()
    assert client.delete(f"/campaigns/{deleted['id']}", headers=api_user.headers).status_code == 200

    got = client.get(f"/lists/{newsletter['id']}", headers=api_user.headers).json()
    assert got["average_email_open_percent"] == 37.5
    assert got["average_email_click_percent"] == 12.5
    got_partners = client.get(f"/lists/{partners['id']}", headers=api_user.headers).json()
    assert got_partners["average_email_open_percent"] == 25.0
    assert got_partners["average_email_click_percent"] == 25.0
    got_quiet = client.get(f"/lists/{quiet['id']}", headers=api_user.headers).json()
    assert got_quiet["average_email_open_percent"] == 0.0
    assert got_quiet["average_email_click_percent"] == 0.0

    # The listing reports the same averages for every list on the page.
    page = {item["id"]: item for item in client.get("/lists", headers=api_user.headers).json()["data"]}
    assert page[newsletter["id"]]["average_email_open_percent"] == 37.5
    assert page[newsletter["id"]]["average_email_click_percent"] == 12.5
    assert page[partners["id"]]["average_email_open_percent"] == 25.0
    assert page[quiet["id"]]["average_email_open_percent"] == 0.0


def test_campaign_list_rows_are_stored(client: TestClient, api_user: ApiUser, db: Session) -> None:
    a = create_list(client, api_user, "A")
    created = create_campaign(client, api_user, lists=[a["id"], a["id"]])
    assert created["lists"] == [a["id"]]
    rows = db.query(CampaignList).filter(CampaignList.campaign_id == created["id"]).all()
    assert [(r.campaign_id, r.list_id) for r in rows] == [(created["id"], a["id"])]
