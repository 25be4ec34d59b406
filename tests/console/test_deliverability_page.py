"""The console's Deliverability in-process: the records of the account's sending domain with its DKIM
key, and the on-demand check through a fake resolver (published, different, missing, unreachable)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.kit.time import utcnow
from app.mail.dkim_service import create_key
from app.mail.dns_records import DnsUnreachable
from app.models import Campaign
from tests.authroutes.conftest import Person
from tests.factories import add_campaign, add_contacts, add_deliverable

SECRET = "test-secret-key-that-is-long-enough-for-tests"


def test_the_records_to_publish_and_their_check_through_the_resolver(
    console: TestClient, db: Session
) -> None:
    page = console.get("/console/deliverability")
    assert page.status_code == 200, page.text
    assert '<h3 id="domain-1">example.com</h3>' in page.text
    assert "No DKIM key yet" in page.text
    key = create_key(
        db, SECRET, "example.com", selector="s1", algorithm="rsa", now=datetime(2026, 11, 1, tzinfo=UTC)
    )
    db.flush()
    page = console.get("/console/deliverability")
    assert "s1._domainkey.example.com" in page.text and key.txt_value in page.text
    assert "_dmarc.example.com" in page.text

    published = {
        "example.com": ["google-site-verification=x", "v=spf1 include:amazonses.com -all"],
        # DNS hosts split a long value into strings; the check joins them back.
        "s1._domainkey.example.com": [key.txt_value[:200] + " " + key.txt_value[200:]],
    }
    asked: list[str] = []

    async def fake(name: str) -> list[str]:
        asked.append(name)
        return published.get(name, [])

    console.app.state.txt_resolver = fake  # type: ignore[attr-defined]
    checked = console.get("/console/deliverability?check=Example.COM").text
    assert sorted(asked) == ["_dmarc.example.com", "example.com", "s1._domainkey.example.com"]
    rows = checked.split('id="check-title"', 1)[1].split("</table>", 1)[0]
    assert rows.count("published as expected") == 2 and rows.count("not published") == 1

    published["s1._domainkey.example.com"] = ["v=DKIM1; k=rsa; p=OLDKEY"]
    assert (
        "published, but not as expected: v=DKIM1; k=rsa; p=OLDKEY"
        in console.get("/console/deliverability?check=example.com").text
    )

    async def unreachable(name: str) -> list[str]:
        raise DnsUnreachable("DNS could not be reached from this server (NoNameservers).")

    console.app.state.txt_resolver = unreachable  # type: ignore[attr-defined]
    down = console.get("/console/deliverability?check=example.com")
    assert down.status_code == 200
    assert (
        "DNS could not be reached from this server (NoNameservers). What to publish is listed below"
        in down.text
    )

    bad = console.get("/console/deliverability?check=not a domain")
    assert "is not a domain name" in bad.text


def test_bounce_and_complaint_rates_of_the_last_30_days_and_the_automatic_stops(
    console: TestClient, db: Session, person: Person
) -> None:
    now = utcnow()
    contacts = add_contacts(db, person.account_id, 4)
    recent, halted, old = (
        add_campaign(db, person.account_id, title) for title in ("Recent", "Halted", "Old")
    )
    for campaign_id, when in (
        (recent, now - timedelta(days=2)),
        (halted, now - timedelta(days=1)),
        (old, now - timedelta(days=40)),
    ):
        campaign = db.get_one(Campaign, campaign_id)
        campaign.sent_at = when
        if campaign_id == halted:
            campaign.halted_at, campaign.halt_reason = when, "bounce rate 50.0% passed 10.0%"
    db.flush()
    sent = {"state": "sent", "sent_at": now - timedelta(days=1)}
    add_deliverable(db, person.account_id, recent, contacts[0], **sent, spam_at=now)
    add_deliverable(db, person.account_id, recent, contacts[1], **sent)
    add_deliverable(
        db, person.account_id, halted, contacts[2], **{**sent, "state": "bounced"}, bounced_at=now
    )
    add_deliverable(db, person.account_id, halted, contacts[3], **sent)
    add_deliverable(db, person.account_id, old, contacts[0], **{**sent, "state": "bounced"}, bounced_at=now)

    page = console.get("/console/deliverability").text
    # 4 sent in the window: 1 bounce (25%), 1 complaint of 3 delivered (33.33%); the old campaign is out.
    assert "Over 4 emails sent" in page
    assert "25.00%" in page and "33.33%" in page
    assert "Recent" in page and ">Old<" not in page
    assert "Halted: bounce rate 50.0% passed 10.0%" in page
