"""POST /webhooks/bounces: the shared secret, bad bodies, and what hard and soft bounces, complaints and
unsubscribe reports do to deliverables, contacts, campaign stats and a campaign's sending."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.main import create_app
from app.models import Campaign
from tests.conftest import ApiUser
from tests.mail.sending.conftest import Sender, SmtpSink, campaign_with_list
from tests.mail.sending.emails import contact_id_of, deliverables_of, stats_of

SECRET = "relay-shared-secret-0123456789"
AUTH = {"Authorization": f"Bearer {SECRET}"}
ANN, BOB, CY, DEE = "ann@example.com", "bob@example.com", "cy@example.com", "dee@example.com"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    # A campaign stops once more than 30% of at least 2 attempted emails bounced; the worker takes
    # 2 emails a round, so a test can bounce the first ones while the rest are still queued.
    return settings.model_copy(
        update={
            "bounce_webhook_secret": SECRET,
            "bounce_stop_rate": 0.3,
            "bounce_stop_min_sent": 2,
            "send_batch_size": 2,
        }
    )


def report(client: TestClient, body: Any) -> dict[str, int]:
    response = client.post("/webhooks/bounces", json=body, headers=AUTH)
    assert response.status_code == 200, response.text
    answer: dict[str, int] = response.json()
    return answer


def sent_campaign(client: TestClient, user: ApiUser, sender: Sender, emails: list[str]) -> int:
    campaign_id = campaign_with_list(client, user.headers, emails)
    assert client.post(f"/campaigns/{campaign_id}/send", headers=user.headers).status_code == 200
    assert sender.drain() == len(emails)
    return campaign_id


def message_id_to(smtp_sink: SmtpSink, address: str, index: int = -1) -> str:
    return str(smtp_sink.to(address)[index].message["Message-ID"])


def contact_state(client: TestClient, user: ApiUser, email: str) -> dict[str, Any]:
    contact_id = contact_id_of(client, user.headers, email)
    response = client.get(f"/contacts/{contact_id}/activity", headers=user.headers)
    assert response.status_code == 200, response.text
    state: dict[str, Any] = response.json()["contact"]
    return state


# ---------------------------------------------------------------------------------------------- access


@pytest.fixture
def client_without_secret(settings: Settings, session_factory: sessionmaker[Session]) -> Iterator[TestClient]:
    app = create_app(
        settings=settings.model_copy(update={"bounce_webhook_secret": ""}), session_factory=session_factory
    )
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


def test_the_webhook_does_not_exist_while_no_secret_is_set(client_without_secret: TestClient) -> None:
    body = {"type": "bounce", "email": ANN}
    for headers in ({}, {"Authorization": "Bearer "}, AUTH):
        response = client_without_secret.post("/webhooks/bounces", json=body, headers=headers)
        assert response.status_code == 404, headers


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        f"Basic {SECRET}",
        f"Bearer {SECRET}x",
        f"Bearer {SECRET[:-1]}",
        "Bearer tdg_x",
    ],
)
def test_the_webhook_wants_the_shared_secret(client: TestClient, authorization: str | None) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    response = client.post("/webhooks/bounces", json={"type": "bounce", "email": ANN}, headers=headers)
    assert response.status_code == 401
    assert response.json() == {"message": "Unauthenticated."}


def test_an_api_token_is_not_the_webhook_secret(client: TestClient, api_user: ApiUser) -> None:
    response = client.post(
        "/webhooks/bounces", json={"type": "bounce", "email": ANN}, headers=api_user.headers
    )
    assert response.status_code == 401


# ---------------------------------------------------------------------------------------------- bodies


DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(
    ("content", "content_type"),
    [
        (b"", "application/json"),
        (b"not json", "application/json"),
        (b"{", "application/json"),
        (b"123", "application/json"),
        (b'"bounce"', "application/json"),
        (b"null", "application/json"),
        (b"[1, 2]", "application/json"),
        (b"[null]", "application/json"),
        (b"{}", "application/json"),
        (b'{"type": "bounce"}', "application/json"),
        (b'{"type": "defer", "email": "a@example.com"}', "application/json"),
        (b'{"type": "bounce", "email": 42}', "application/json"),
        (b'{"type": "bounce", "email": ""}', "application/json"),
        (b'{"type": "bounce", "email": "a\\u0000@example.com"}', "application/json"),
        (b'{"type": "bounce", "email": "\\ud800@example.com"}', "application/json"),
        (b'{"type": "bounce", "email": "a@example.com", "message_id": ["x"]}', "application/json"),
        (
            b'{"type": "bounce", "email": "a@example.com", "message_id": "<1.1.ab\\u0000@x>"}',
            "application/json",
        ),
        (b'{"type": "bounce", "email": "a@example.com", "bounce_type": "medium"}', "application/json"),
        (b'{"type": ["bounce"], "email": "a@example.com"}', "application/json"),
        (b"type=bounce&email=a@example.com", "application/x-www-form-urlencoded"),
        (b"\xff\xfe\x00garbage", "application/octet-stream"),
        (DEEP, "application/json"),
        (
            json.dumps([{"type": "bounce", "email": f"u{i}@example.com"} for i in range(1001)]).encode(),
            "application/json",
        ),
        (b" " * (2 * 1024 * 1024 + 1), "application/json"),
    ],
)
def test_bad_bodies_are_4xx_with_a_message(client: TestClient, content: bytes, content_type: str) -> None:
    response = client.post(
        "/webhooks/bounces", content=content, headers={**AUTH, "Content-Type": content_type}
    )
    assert 400 <= response.status_code < 500, response.text
    body = response.json()
    assert isinstance(body["message"], str) and body["message"]
    if response.status_code == 422:
        assert isinstance(body["errors"], dict) and body["errors"]


def test_validation_errors_name_the_field_and_the_item(client: TestClient) -> None:
    response = client.post(
        "/webhooks/bounces",
        json=[{"type": "bounce", "email": ANN}, {"type": "nope", "email": ANN}, {"type": "complaint"}],
        headers=AUTH,
    )
    assert response.status_code == 422
    assert set(response.json()["errors"]) == {"1.type", "2.email"}
    single = client.post("/webhooks/bounces", json={"email": ANN}, headers=AUTH)
    assert single.status_code == 422
    assert set(single.json()["errors"]) == {"type"}


def test_an_empty_list_and_unknown_addresses_are_answered_and_ignored(client: TestClient) -> None:
    assert report(client, []) == {"processed": 0, "ignored": 0}
    unknown = [
        {"type": "bounce", "email": "nobody@example.com"},
        {"type": "complaint", "email": "nobody@example.com", "message_id": "<1.1.ab@example.com>"},
        {"type": "unsubscribe", "email": "x@example.com", "message_id": "<99999999999.1.ab@h>", "extra": 1},
    ]
    assert report(client, unknown) == {"processed": 0, "ignored": 3}


# ---------------------------------------------------------------------------------------------- bounces


def test_a_hard_bounce_marks_the_contact_and_stops_a_campaign_past_the_bounce_rate(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink, db: Session
) -> None:
    campaign_id = campaign_with_list(client, api_user.headers, [ANN, BOB, CY, DEE])
    assert client.post(f"/campaigns/{campaign_id}/send", headers=api_user.headers).status_code == 200
    sender.worker.fan_out()
    assert sender.step() == 2  # Ann and Bob are sent; Cy and Dee still queued
    assert [r.state for r in deliverables_of(db, CY) + deliverables_of(db, DEE)] == ["queued", "queued"]

    answer = report(client, {"type": "bounce", "email": ANN, "message_id": message_id_to(smtp_sink, ANN)})
    assert answer == {"processed": 1, "ignored": 0}
    row = deliverables_of(db, ANN)[0]
    assert row.state == "bounced" and row.bounced_at is not None and row.sent_at is not None
    assert contact_state(client, api_user, ANN)["bounced_at"] is not None
    assert contact_state(client, api_user, BOB)["bounced_at"] is None
    # 1 of 2 attempted bounced: past 30%, so the campaign stopped and its queued emails were cancelled.
    halted = db.execute(
        select(Campaign.halted_at, Campaign.halt_reason).where(Campaign.id == campaign_id)
    ).one()
    assert halted.halted_at is not None and "bounced" in (halted.halt_reason or "")
    assert [r.state for r in deliverables_of(db, CY) + deliverables_of(db, DEE)] == ["cancelled", "cancelled"]
    assert sender.drain() == 0
    assert len(smtp_sink.received) == 2
    stats = stats_of(client, api_user.headers, campaign_id)
    assert (stats["sent_count"], stats["bounce_count"], stats["bounce_rate"]) == (2, 1, 50.0)


def test_a_hard_bounce_below_the_rate_stops_nothing_and_the_contact_gets_no_later_campaign(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink, db: Session
) -> None:
    campaign_id = sent_campaign(client, api_user, sender, [ANN, BOB, CY, DEE])
    # The message id without its angle brackets is found all the same.
    bare = message_id_to(smtp_sink, BOB).strip("<>")
    assert report(client, [{"type": "bounce", "email": BOB, "message_id": bare, "bounce_type": "hard"}]) == {
        "processed": 1,
        "ignored": 0,
    }
    assert db.scalar(select(Campaign.halted_at).where(Campaign.id == campaign_id)) is None  # 1 of 4
    assert contact_state(client, api_user, BOB)["bounced_at"] is not None

    list_id = client.get("/lists", headers=api_user.headers).json()["data"][0]["id"]
    again = campaign_with_list(client, api_user.headers, [])
    client.patch(f"/campaigns/{again}", json={"lists": [list_id]}, headers=api_user.headers)
    assert client.post(f"/campaigns/{again}/send", headers=api_user.headers).status_code == 200
    assert sender.drain() == 3
    assert len(smtp_sink.to(BOB)) == 1


def test_a_soft_bounce_is_counted_and_changes_nothing(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink, db: Session
) -> None:
    campaign_id = sent_campaign(client, api_user, sender, [ANN, BOB])
    before = deliverables_of(db, ANN)
    body = {
        "type": "bounce",
        "bounce_type": "soft",
        "email": ANN,
        "message_id": message_id_to(smtp_sink, ANN),
    }
    assert report(client, body) == {"processed": 1, "ignored": 0}
    assert deliverables_of(db, ANN) == before
    assert contact_state(client, api_user, ANN)["bounced_at"] is None
    assert stats_of(client, api_user.headers, campaign_id)["bounce_count"] == 0


def test_repeated_reports_change_nothing(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink, db: Session
) -> None:
    campaign_id = sent_campaign(client, api_user, sender, [ANN, BOB, CY, DEE])
    bounce = {"type": "bounce", "email": ANN, "message_id": message_id_to(smtp_sink, ANN)}
    complaint = {"type": "complaint", "email": BOB}
    assert report(client, [bounce, bounce, complaint, complaint]) == {"processed": 4, "ignored": 0}
    first = deliverables_of(db, ANN) + deliverables_of(db, BOB)
    ann, bob = contact_state(client, api_user, ANN), contact_state(client, api_user, BOB)
    assert report(client, [bounce, complaint]) == {"processed": 2, "ignored": 0}
    assert deliverables_of(db, ANN) + deliverables_of(db, BOB) == first
    assert (contact_state(client, api_user, ANN), contact_state(client, api_user, BOB)) == (ann, bob)
    stats = stats_of(client, api_user.headers, campaign_id)
    assert (stats["bounce_count"], stats["spam_count"], stats["unsubscribe_count"]) == (1, 1, 1)


# ---------------------------------------------------------------------------------------------- complaints


def test_complaints_and_unsubscribe_reports_unsubscribe_and_fall_back_to_the_latest_email(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink, db: Session
) -> None:
    first = sent_campaign(client, api_user, sender, [ANN, BOB, CY])
    list_id = client.get("/lists", headers=api_user.headers).json()["data"][0]["id"]
    second = campaign_with_list(client, api_user.headers, [])
    client.patch(f"/campaigns/{second}", json={"lists": [list_id]}, headers=api_user.headers)
    assert client.post(f"/campaigns/{second}/send", headers=api_user.headers).status_code == 200
    assert sender.drain() == 3

    reports = [
        # No message id: the latest email to Ann (the second campaign).
        {"type": "complaint", "email": ANN.upper()},
        # Ann's message id with Bob's address: not Bob's email, so Bob's latest is meant.
        {"type": "unsubscribe", "email": BOB, "message_id": message_id_to(smtp_sink, ANN, 0)},
        # Cy's first email, by its message id.
        {"type": "unsubscribe", "email": CY, "message_id": message_id_to(smtp_sink, CY, 0)},
        {"type": "complaint", "email": "stranger@example.com"},
    ]
    assert report(client, reports) == {"processed": 3, "ignored": 1}
    ann_first, ann_second = deliverables_of(db, ANN)
    assert ann_first.spam_at is None and ann_second.spam_at is not None
    assert ann_second.unsubscribed_at is not None and ann_first.unsubscribed_at is None
    bob_first, bob_second = deliverables_of(db, BOB)
    assert (bob_first.unsubscribed_at, bob_first.spam_at) == (None, None)
    assert bob_second.unsubscribed_at is not None and bob_second.spam_at is None
    assert deliverables_of(db, CY)[0].unsubscribed_at is not None
    for email in (ANN, BOB, CY):
        contact = client.get(
            f"/contacts/{contact_id_of(client, api_user.headers, email)}", headers=api_user.headers
        )
        assert contact.json()["unsubscribed_at"] is not None, email
    second_stats = stats_of(client, api_user.headers, second)
    assert (second_stats["spam_count"], second_stats["unsubscribe_count"]) == (1, 2)
    first_stats = stats_of(client, api_user.headers, first)
    assert (first_stats["spam_count"], first_stats["unsubscribe_count"]) == (0, 1)


def test_a_message_id_finds_its_own_account_even_when_another_emailed_the_address_later(
    client: TestClient, api_user: ApiUser, make_user: Any, sender: Sender, smtp_sink: SmtpSink
) -> None:
    other = make_user()
    sent_campaign(client, api_user, sender, [ANN])
    sent_campaign(client, other, sender, [ANN])
    mine = message_id_to(smtp_sink, ANN, 0)
    assert report(client, {"type": "bounce", "email": ANN, "message_id": mine}) == {
        "processed": 1,
        "ignored": 0,
    }
    assert contact_state(client, api_user, ANN)["bounced_at"] is not None
    assert contact_state(client, other, ANN)["bounced_at"] is None
    # Without a message id the latest email to the address is meant: the other account's.
    assert report(client, {"type": "unsubscribe", "email": ANN}) == {"processed": 1, "ignored": 0}
    assert contact_state(client, other, ANN)["unsubscribed_at"] is not None
    assert contact_state(client, api_user, ANN)["unsubscribed_at"] is None
