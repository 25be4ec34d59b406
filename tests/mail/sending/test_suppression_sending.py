"""A suppressed address is never sent to, by a campaign (the real fan-out and worker into the loopback
SMTP server) or by an automation, however it got on the list: added by the API (before or after it was
a contact, or while an email to it was queued), a hard bounce (a report, or a 550 at the SMTP
dialogue), a complaint (an ARF report of an email it received); and it stays suppressed when the
contact is deleted and imported again. Campaigns stop past the complaint rate."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session

from app.config import Settings
from app.kit.time import utcnow
from app.mail.bounces.arf import complaint_report
from app.mail.sending.queue import BounceRule, stop_bouncing_campaigns
from app.models import Campaign, Contact, Deliverable, Suppression
from tests.conftest import ApiUser
from tests.factories import add_campaign, add_contacts, create_list
from tests.mail.bounces.arf_samples import yahoo_style
from tests.mail.sending.conftest import Sender, SmtpSink, campaign_with_list
from tests.mail.sending.emails import deliverables_of, stats_of
from tests.mail.sending.test_automation_runs import automation

SECRET = "relay-shared-secret-0123456789"
AUTH = {"Authorization": f"Bearer {SECRET}"}
API, BOUNCED, REFUSED, COMPLAINED, DELETED, LATE, FRESH = (
    "api@example.com",
    "bounced@example.com",
    "refused@example.com",
    "complained@example.com",
    "deleted@example.com",
    "late@example.com",
    "fresh@example.com",
)


@pytest.fixture
def settings(settings: Settings) -> Settings:
    # Campaigns stop only past the complaint rule the complaint tests set: bounces never stop them here.
    return settings.model_copy(
        update={
            "bounce_webhook_secret": SECRET,
            "bounce_stop_rate": 1.0,
            "complaint_stop_rate": 0.2,
            "complaint_stop_min_sent": 4,
            "send_batch_size": 2,
        }
    )


def report(client: TestClient, body: Any) -> None:
    response = client.post("/webhooks/bounces", json=body, headers=AUTH)
    assert response.status_code == 200, response.text
    assert response.json()["ignored"] == 0


def suppress(client: TestClient, user: ApiUser, *emails: str) -> None:
    response = client.post("/suppressions", json={"emails": list(emails)}, headers=user.headers)
    assert response.status_code == 200, response.text


def send_to_list(client: TestClient, user: ApiUser, list_id: int) -> int:
    campaign_id = campaign_with_list(client, user.headers, [])
    client.patch(f"/campaigns/{campaign_id}", json={"lists": [list_id]}, headers=user.headers)
    assert client.post(f"/campaigns/{campaign_id}/send", headers=user.headers).status_code == 200
    return campaign_id


def reasons(db: Session) -> dict[str, str]:
    return dict(db.execute(select(Suppression.email_key, Suppression.reason)).all())


def complain_by_arf(client: TestClient, smtp_sink: SmtpSink, address: str) -> None:
    """The recipient's provider sends an ARF report around the email it got; the bounce mailbox turns it
    into a complaint report."""
    found = complaint_report(yahoo_style(smtp_sink.to(address)[-1].data, address))
    assert found is not None
    report(client, found.model_dump())


@pytest.fixture
def world(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink, db: Session
) -> Iterator[int]:
    """A first campaign to everyone; then each address but FRESH and LATE goes on the list its own way.
    Yields the list id."""
    smtp_sink.refuse[REFUSED] = "550 5.1.1 No such user"
    everyone = [API, BOUNCED, REFUSED, COMPLAINED, DELETED, LATE, FRESH]
    first = campaign_with_list(client, api_user.headers, everyone)
    assert client.post(f"/campaigns/{first}/send", headers=api_user.headers).status_code == 200
    sender.drain()
    assert {r for received in smtp_sink.received for r in received.recipients} == set(everyone) - {REFUSED}
    suppress(client, api_user, API.upper())
    message_id = str(smtp_sink.to(BOUNCED)[-1].message["Message-ID"])
    report(
        client,
        [
            {"type": "bounce", "email": BOUNCED, "message_id": message_id},
            {"type": "bounce", "email": DELETED},
        ],
    )
    complain_by_arf(client, smtp_sink, COMPLAINED)
    assert reasons(db) == {
        API: "api",
        BOUNCED: "bounce",
        REFUSED: "bounce",
        COMPLAINED: "complaint",
        DELETED: "bounce",
    }
    list_id = client.get("/lists", headers=api_user.headers).json()["data"][0]["id"]

    # DELETED's contact is deleted, then its row is gone altogether (as an account purge would do it),
    # and it is imported again as a new, subscribed, never-bounced contact.
    old_id = db.scalar(select(Contact.id).where(Contact.email_key == DELETED))
    deleted = client.delete(f"/contacts/{old_id}", headers=api_user.headers)
    assert deleted.status_code == 200, deleted.text
    db.execute(delete(Deliverable).where(Deliverable.contact_id == old_id))
    db.execute(delete(Contact).where(Contact.id == old_id))
    db.commit()
    again = client.post(
        "/contacts/batch",
        json={"contacts": [{"email": DELETED, "lists": [list_id]}]},
        headers=api_user.headers,
    )
    assert again.status_code == 200 and again.json()["created"] == 1, again.text
    new = db.execute(
        select(Contact.id, Contact.bounced_at, Contact.unsubscribed_at).where(Contact.email_key == DELETED)
    ).one()
    assert new.id != old_id and (new.bounced_at, new.unsubscribed_at) == (None, None)
    # An address added by the API before it ever was a contact.
    suppress(client, api_user, "before@example.com")
    client.post(
        "/contacts", json={"email": "Before@Example.com", "lists": [list_id]}, headers=api_user.headers
    )
    smtp_sink.received.clear()
    yield list_id


def test_a_campaign_sends_to_no_suppressed_address(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink, db: Session, world: int
) -> None:
    campaign_id = send_to_list(client, api_user, world)
    assert sender.drain() == 2
    assert sorted(r for received in smtp_sink.received for r in received.recipients) == [FRESH, LATE]
    # The suppressed were never even queued.
    assert stats_of(client, api_user.headers, campaign_id)["recipients_total"] == 2


def test_an_email_queued_before_its_address_was_suppressed_is_not_sent(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink, db: Session, world: int
) -> None:
    send_to_list(client, api_user, world)
    sender.worker.fan_out()
    assert [r.state for r in deliverables_of(db, LATE)][-1] == "queued"
    # Put on the list behind the API's back (as another process might, between the fan-out and the
    # claim): the claim cancels the email instead of sending it.
    db.execute(
        insert(Suppression).values(
            account_id=api_user.account_id, email=LATE, email_key=LATE, reason="api", created_at=utcnow()
        )
    )
    db.commit()
    assert sender.drain() == 1
    assert [r for received in smtp_sink.received for r in received.recipients] == [FRESH]
    assert [r.state for r in deliverables_of(db, LATE)][-1] == "cancelled"


def test_suppressing_by_the_api_cancels_what_is_queued(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink, db: Session, world: int
) -> None:
    send_to_list(client, api_user, world)
    sender.worker.fan_out()
    suppress(client, api_user, LATE)
    assert [r.state for r in deliverables_of(db, LATE)][-1] == "cancelled"
    assert sender.drain() == 1
    assert [r for received in smtp_sink.received for r in received.recipients] == [FRESH]


def test_an_automation_sends_to_no_suppressed_address(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink, db: Session, world: int
) -> None:
    welcome = create_list(client, api_user, "Welcome")["id"]
    series = automation(client, api_user, [0], trigger_type="apply_list", trigger_list_id=welcome)
    everyone = [API, BOUNCED, REFUSED, COMPLAINED, DELETED, "before@example.com", LATE, FRESH]
    batch = {"contacts": [{"email": e, "lists": [welcome]} for e in everyone]}
    assert client.post("/contacts/batch", json=batch, headers=api_user.headers).status_code == 200
    queued = db.scalars(
        select(Deliverable.contact_id).where(Deliverable.campaign_id == series["emails"][0])
    ).all()
    assert len(queued) == 2
    suppress(client, api_user, LATE)
    assert sender.drain() == 1
    assert [r for received in smtp_sink.received for r in received.recipients] == [FRESH]


def test_removing_a_suppression_lets_the_address_be_sent_to_again(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink, world: int
) -> None:
    assert client.delete(f"/suppressions/{BOUNCED}", headers=api_user.headers).status_code == 200
    assert client.delete(f"/suppressions/{API}", headers=api_user.headers).status_code == 200
    send_to_list(client, api_user, world)
    assert sender.drain() == 4
    assert sorted(r for received in smtp_sink.received for r in received.recipients) == sorted(
        [API, BOUNCED, FRESH, LATE]
    )


# ------------------------------------------------------------------------------------ complaint rate


def test_a_campaign_stops_past_the_complaint_rate_of_its_delivered_emails(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink, db: Session
) -> None:
    readers = [f"r{i}@example.com" for i in range(6)]
    campaign_id = campaign_with_list(client, api_user.headers, readers)
    assert client.post(f"/campaigns/{campaign_id}/send", headers=api_user.headers).status_code == 200
    sender.worker.fan_out()
    assert sender.step() == 2
    # 1 complaint of 2 delivered: past 20%, but fewer than 4 delivered, so the campaign goes on.
    complain_by_arf(client, smtp_sink, readers[0])
    assert db.scalar(select(Campaign.halted_at).where(Campaign.id == campaign_id)) is None
    assert sender.step() == 2
    # Now 4 delivered; a second complaint makes 2 of 4: the campaign stops and its queued emails go.
    complain_by_arf(client, smtp_sink, readers[2])
    db.expire_all()
    halted = db.execute(
        select(Campaign.halted_at, Campaign.halt_reason).where(Campaign.id == campaign_id)
    ).one()
    assert halted.halted_at is not None
    assert halted.halt_reason == "stopped: more than 20% of its delivered emails were reported as spam"
    assert sender.drain() == 0
    stats = stats_of(client, api_user.headers, campaign_id)
    assert (stats["sent_count"], stats["spam_count"], stats["spam_rate"], stats["sending_state"]) == (
        4,
        2,
        50.0,
        "halted",
    )
    assert (stats["cancelled_count"], stats["unsubscribe_count"]) == (2, 2)


def test_the_default_rule_stops_past_one_complaint_in_a_thousand_delivered(
    db: Session, api_user: ApiUser
) -> None:
    now = utcnow()
    campaign_id = add_campaign(db, api_user.account_id)
    contact_ids = add_contacts(db, api_user.account_id, 1003)
    rows = [
        {
            "account_id": api_user.account_id,
            "campaign_id": campaign_id,
            "contact_id": cid,
            "state": "sent",
            "send_after": now,
            "sent_at": now,
            "attempts": 1,
            "created_at": now,
            "updated_at": now,
        }
        for cid in contact_ids[:1000]
    ]
    rows += [
        {
            "account_id": api_user.account_id,
            "campaign_id": campaign_id,
            "contact_id": cid,
            "state": "queued",
            "send_after": now + timedelta(hours=1),
            "attempts": 0,
            "created_at": now,
            "updated_at": now,
        }
        for cid in contact_ids[1000:]
    ]
    db.execute(insert(Deliverable), rows)
    rule = BounceRule()
    assert (rule.complaint_rate, rule.complaint_min_sent) == (0.001, 1000)

    def complain(count: int) -> list[int]:
        ids = db.scalars(
            select(Deliverable.id)
            .where(Deliverable.campaign_id == campaign_id, Deliverable.state == "sent")
            .order_by(Deliverable.id)
            .limit(count)
        ).all()
        for deliverable_id in ids:
            db.get_one(Deliverable, deliverable_id).spam_at = now
        db.flush()
        return stop_bouncing_campaigns(db, [campaign_id], now, rule)

    assert complain(1) == []  # 1 in 1000 is 0.1%: not past it
    assert complain(2) == [campaign_id]  # 2 in 1000
    halt_reason = db.scalar(select(Campaign.halt_reason).where(Campaign.id == campaign_id))
    assert halt_reason == "stopped: more than 0.1% of its delivered emails were reported as spam"
    states = db.scalars(select(Deliverable.state).where(Deliverable.contact_id.in_(contact_ids[1000:]))).all()
    assert states == ["cancelled"] * 3
