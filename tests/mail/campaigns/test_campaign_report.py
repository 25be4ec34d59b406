"""GET /campaigns/{id}/report: events per hour for 48 hours from the start of sending (empty hours
listed), per day of the account's time zone after, and delivery as it stands; 404 for another account's
campaign. The moments are set on the rows; the answer does not depend on the hour the test runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.orm import Session

from app.models import Account, Campaign, Deliverable
from tests.conftest import ApiUser
from tests.factories import add_campaign, add_contacts, add_deliverable

START = datetime(2030, 12, 31, 22, 40, tzinfo=UTC)


def report(client: TestClient, user: ApiUser, campaign_id: int) -> Any:
    return client.get(f"/campaigns/{campaign_id}/report", headers=user.headers)


def test_the_report_buckets_by_hour_then_by_the_accounts_day(
    client: TestClient, api_user: ApiUser, make_user: Any, db: Session
) -> None:
    db.execute(update(Account).where(Account.id == api_user.account_id).values(timezone="America/New_York"))
    campaign_id = add_campaign(db, api_user.account_id)
    db.execute(update(Campaign).where(Campaign.id == campaign_id).values(sent_at=START))
    db.commit()
    ann, bob, cy, dee = add_contacts(db, api_user.account_id, 4)
    hour = timedelta(hours=1)
    add_deliverable(
        db,
        api_user.account_id,
        campaign_id,
        ann,
        state="sent",
        sent_at=START + timedelta(minutes=1),
        opened_at=START + hour,
        clicked_at=START + hour + timedelta(minutes=5),
    )
    # Opened three days later: 2031-01-03 23:30 UTC is 18:30 on the 3rd in New York.
    add_deliverable(
        db,
        api_user.account_id,
        campaign_id,
        bob,
        state="sent",
        sent_at=START + timedelta(minutes=2),
        opened_at=datetime(2031, 1, 3, 23, 30, tzinfo=UTC),
        unsubscribed_at=datetime(2031, 1, 4, 5, 0, tzinfo=UTC),  # 00:00 on the 4th in New York
    )
    failed = add_deliverable(db, api_user.account_id, campaign_id, cy, state="failed")
    db.execute(
        update(Deliverable).where(Deliverable.id == failed).values(updated_at=START + timedelta(minutes=10))
    )
    db.commit()
    add_deliverable(db, api_user.account_id, campaign_id, dee, state="queued")
    answer = report(client, api_user, campaign_id)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["sending_state"] == "sending"
    assert body["started_at"].startswith("2030-12-31T22:40:00")
    assert body["timezone"] == "America/New_York"
    assert body["delivery"] == {"recipients": 4, "sent": 2, "failed": 1, "cancelled": 0, "pending": 1}
    hourly = body["hourly"]
    assert len(hourly) == 48
    assert hourly[0]["start"].startswith("2030-12-31T22:00:00")
    assert hourly[47]["start"].startswith("2031-01-02T21:00:00")
    zero = {
        "sent": 0,
        "failed": 0,
        "opened": 0,
        "clicked": 0,
        "unsubscribed": 0,
        "bounced": 0,
        "complained": 0,
    }
    assert {k: hourly[0][k] for k in zero} == {**zero, "sent": 2, "failed": 1}
    assert {k: hourly[1][k] for k in zero} == {**zero, "opened": 1, "clicked": 1}
    assert all({k: h[k] for k in zero} == zero for h in hourly[2:])
    assert body["daily"] == [
        {"date": "2031-01-03", **zero, "opened": 1},
        {"date": "2031-01-04", **zero, "unsubscribed": 1},
    ]
    other = make_user("other@example.com")
    assert report(client, other, campaign_id).status_code == 404


def test_a_draft_has_an_empty_report(client: TestClient, api_user: ApiUser, db: Session) -> None:
    campaign_id = add_campaign(db, api_user.account_id)
    body = report(client, api_user, campaign_id).json()
    assert (body["sending_state"], body["started_at"], body["hourly"], body["daily"]) == (
        "draft",
        None,
        [],
        [],
    )
