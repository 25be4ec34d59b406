"""The console's Home in-process: the latest campaigns with their opens and clicks (campaign_stats, as
the API's stats), a sending campaign's progress, the contacts added in the last 7 days, and a campaign
the automatic stop halted with why; the console starts there."""

from __future__ import annotations

from datetime import timedelta

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.kit.time import utcnow
from app.models import Campaign, Contact
from tests.authroutes.conftest import Person
from tests.factories import add_campaign, add_contacts, add_deliverable


def test_latest_campaigns_new_contacts_and_halted_campaigns(
    console: TestClient, db: Session, person: Person
) -> None:
    assert console.get("/console").headers["location"] == "/console/home"
    empty = console.get("/console/home")
    assert empty.status_code == 200 and "You have no campaigns yet." in empty.text

    now = utcnow()
    contacts = add_contacts(db, person.account_id, 4)
    for contact_id, age in zip(contacts, (1, 2, 6, 10), strict=True):
        db.get_one(Contact, contact_id).created_at = now - timedelta(days=age)
    sent, sending, halted = (add_campaign(db, person.account_id, t) for t in ("Sent one", "Going", "Stopped"))
    for campaign_id in (sent, sending, halted):
        db.get_one(Campaign, campaign_id).sent_at = now - timedelta(hours=1)
    stopped = db.get_one(Campaign, halted)
    stopped.halted_at, stopped.halt_reason = now, "complaint rate 0.5% passed 0.3%"
    db.flush()
    done = {"state": "sent", "sent_at": now - timedelta(minutes=30)}
    add_deliverable(db, person.account_id, sent, contacts[0], **done, opened_at=now, clicked_at=now)
    add_deliverable(db, person.account_id, sent, contacts[1], **done, opened_at=now)
    add_deliverable(db, person.account_id, sent, contacts[2], **done)
    add_deliverable(db, person.account_id, sent, contacts[3], **done)
    add_deliverable(db, person.account_id, sending, contacts[0], **done)
    add_deliverable(db, person.account_id, sending, contacts[1], state="queued")

    page = console.get("/console/home").text
    assert "<strong>3</strong> added in the last 7 days" in page
    cells = {
        title: page.split(f">{title}</a></td>", 1)[1].split("</tr>", 1)[0].replace("\n", "")
        for title in ("Sent one", "Going")
    }
    assert cells["Sent one"] == "<td>sent</td><td>4 of 4</td><td>2 (50.0%)</td><td>1 (25.0%)</td>"
    assert cells["Going"].startswith("<td>sending (50%)</td><td>1 of 2</td>")
    assert "Stopped, " in page and ": complaint rate 0.5% passed 0.3%</li>" in page
