"""Blocked refusals (the receiver refused the sender, not the address): through the SMTP dialogue and
POST /webhooks/bounces they suppress nothing, are recorded per receiving domain, and stop a campaign when
one domain refuses too much of it; a dead address still bounces and suppresses."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.config import Settings
from app.models import BlockedRejection, Campaign, Suppression
from tests.conftest import ApiUser
from tests.mail.sending.conftest import Sender, SmtpSink, campaign_with_list
from tests.mail.sending.emails import deliverables_of
from tests.mail.sending.test_bounce_webhook import AUTH, SECRET, contact_state, message_id_to, report

GMAIL_UNAUTHENTICATED = "550 5.7.26 This mail has been blocked because the sender is unauthenticated."
AT_GMAIL = [f"reader{n}@gmail.example.com" for n in range(4)]
AT_OTHER = ["ann@example.org", "bob@example.org"]


@pytest.fixture
def settings(settings: Settings) -> Settings:
    # Stops once more than 40% of at least 2 attempted emails to one domain were blocked; the worker
    # takes 2 emails a round, so a test can refuse the first ones while the rest are still queued.
    return settings.model_copy(
        update={
            "bounce_webhook_secret": SECRET,
            "blocked_stop_rate": 0.4,
            "blocked_stop_min": 2,
            "send_batch_size": 2,
        }
    )


def suppressed(db: Session) -> set[str]:
    return set(db.scalars(select(Suppression.email_key)))


def blocked_rows(db: Session) -> list[tuple[str, str | None]]:
    return [
        (row.receiving_domain, row.status)
        for row in db.execute(select(BlockedRejection).order_by(BlockedRejection.deliverable_id)).scalars()
    ]


def halt_reason(db: Session, campaign_id: int) -> str | None:
    db.expire_all()
    return db.scalar(select(Campaign.halt_reason).where(Campaign.id == campaign_id))


def test_a_policy_refusal_at_the_smtp_dialogue_is_blocked_and_suppresses_nothing(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink, db: Session
) -> None:
    smtp_sink.refuse[AT_GMAIL[0]] = GMAIL_UNAUTHENTICATED
    smtp_sink.refuse[AT_OTHER[0]] = "550 5.1.1 No such user"
    campaign_id = campaign_with_list(client, api_user.headers, [AT_GMAIL[0], AT_OTHER[0], AT_OTHER[1]])
    assert client.post(f"/campaigns/{campaign_id}/send", headers=api_user.headers).status_code == 200
    sender.drain()
    refused = deliverables_of(db, AT_GMAIL[0])[0]
    assert (refused.state, refused.bounced_at) == ("failed", None)
    assert deliverables_of(db, AT_OTHER[0])[0].state == "bounced"
    assert suppressed(db) == {AT_OTHER[0]}  # the dead address only
    assert blocked_rows(db) == [("gmail.example.com", "5.7.26")]
    assert contact_state(client, api_user, AT_GMAIL[0])["bounced_at"] is None
    assert halt_reason(db, campaign_id) is None  # 1 refusal at gmail.example.com: under the minimum of 2


def test_blocked_refusals_at_one_domain_stop_the_campaign_with_its_reason(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink, db: Session
) -> None:
    for address in AT_GMAIL:
        smtp_sink.refuse[address] = GMAIL_UNAUTHENTICATED
    campaign_id = campaign_with_list(client, api_user.headers, [*AT_GMAIL, *AT_OTHER])
    assert client.post(f"/campaigns/{campaign_id}/send", headers=api_user.headers).status_code == 200
    sender.worker.fan_out()
    assert sender.step() == 2  # the first two (gmail.example.com) refused; the rest still queued
    reason = halt_reason(db, campaign_id) or ""
    assert "gmail.example.com" in reason and "5.7.26" in reason and "2 of 2" in reason
    assert all(
        row.state == "cancelled"
        for address in AT_GMAIL[2:] + AT_OTHER
        for row in deliverables_of(db, address)
    )
    assert suppressed(db) == set()
    assert sender.drain() == 0


def test_webhook_reports_are_classified_by_their_diagnostic(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink, db: Session
) -> None:
    campaign_id = campaign_with_list(client, api_user.headers, [AT_GMAIL[0], *AT_OTHER])
    assert client.post(f"/campaigns/{campaign_id}/send", headers=api_user.headers).status_code == 200
    assert sender.drain() == 3
    reports = [
        # Reported as hard by a relay that calls every 5xx hard: the 5.7.26 says otherwise.
        {"type": "bounce", "email": AT_GMAIL[0], "diagnostic": f"smtp; {GMAIL_UNAUTHENTICATED}"},
        {"type": "bounce", "email": AT_OTHER[0], "bounce_type": "blocked"},
        {"type": "bounce", "email": AT_OTHER[1], "diagnostic": "smtp; 550 5.1.1 user unknown"},
    ]
    assert report(client, reports) == {"processed": 3, "ignored": 0}
    assert report(client, reports[:2]) == {"processed": 2, "ignored": 0}  # a repeat records nothing twice
    assert blocked_rows(db) == [("gmail.example.com", "5.7.26"), ("example.org", None)]
    assert suppressed(db) == {AT_OTHER[1]}
    assert [row.state for row in deliverables_of(db, AT_GMAIL[0])] == ["sent"]
    assert halt_reason(db, campaign_id) is None  # finished campaigns are left alone


def test_a_blocked_bounce_type_is_a_valid_report(client: TestClient) -> None:
    answer = client.post(
        "/webhooks/bounces",
        json={"type": "bounce", "email": "nobody@example.com", "bounce_type": "blocked", "diagnostic": "x"},
        headers=AUTH,
    )
    assert answer.status_code == 200 and answer.json() == {"processed": 0, "ignored": 1}
    wrong = client.post(
        "/webhooks/bounces",
        json={"type": "bounce", "email": "a@example.com", "bounce_type": "odd"},
        headers=AUTH,
    )
    assert wrong.status_code == 422 and "bounce_type" in wrong.json()["errors"]


def test_message_ids_still_name_the_email(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink, db: Session
) -> None:
    campaign_id = campaign_with_list(client, api_user.headers, [AT_GMAIL[0]])
    assert client.post(f"/campaigns/{campaign_id}/send", headers=api_user.headers).status_code == 200
    sender.drain()
    body = {
        "type": "bounce",
        "email": AT_GMAIL[0],
        "message_id": message_id_to(smtp_sink, AT_GMAIL[0]),
        "diagnostic": "5.7.1",
    }
    assert report(client, body) == {"processed": 1, "ignored": 0}
    assert blocked_rows(db) == [("gmail.example.com", "5.7.1")]
