"""The console's Campaigns in-process: the editor (Markdown made html, pasted html cleaned and its styles
inlined, merge tags offered from the account's fields), the preview as a chosen contact (what the API's
preview makes), a test email to yourself (it arrives), send/schedule/pause/resume/cancel/unschedule
each after a confirmation, through the API's services and their refusals; the report with its charts
and figures; another account's campaign and an automation's email are 404, a cross-site post 403."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.config import Settings
from app.identity.principal import Principal, principal_of
from app.kit.time import utcnow
from app.mail import contact_service
from app.mail.list_service import make_list
from app.models import (
    Account,
    Automation,
    Campaign,
    Contact,
    Deliverable,
    DeliverableState,
    LinkClick,
    User,
)
from tests.authroutes.conftest import Person
from tests.smtp_sink import SmtpSink


@pytest.fixture(autouse=True)
def relay(settings: Settings, smtp_sink: SmtpSink) -> SmtpSink:
    """Test emails go to the loopback SMTP server (set before the console's app is made)."""
    settings.smtp_url = smtp_sink.url
    return smtp_sink


def _principal(db: Session, person: Person) -> Principal:
    return principal_of(db.get_one(User, person.user_id), db.get_one(Account, person.account_id))


def _readers(db: Session, person: Person) -> int:
    """A list Readers holding Ann (with a city) and Bo."""
    readers = make_list(db, person.account_id, person.user_id, "Readers")
    writes = [
        contact_service.ContactWrite(
            "ann@example.com", first_name="Ann", lists=[readers.id], fields={"city": "Oslo"}
        ),
        contact_service.ContactWrite("bo@example.com", lists=[readers.id]),
    ]
    contact_service.upsert_contacts(db, _principal(db, person), writes, validation_status=422)
    return int(readers.id)


def _campaign(db: Session, campaign_id: int) -> Campaign:
    db.expire_all()
    return db.get_one(Campaign, campaign_id)


FORM = {
    "title": "November news",
    "subject": "Hello {{ first_name | friend }}",
    "from_name": "Ada",
    "from_email": "ada@example.com",
    "preheader": "What happened in November",
    "reply_to": "replies@example.com",
    "text": "Hi {{ first_name | friend }}, in plain text.",
    "track_opens": "yes",
    "body_format": "markdown",
    "body": "# Hi {{ first_name | friend }}\n\nYou live in {{ city }}. [Read](https://example.com/a)\n\n"
    "<script>alert(1)</script>",
}


def test_write_preview_and_save_a_campaign(console: TestClient, db: Session, person: Person) -> None:
    readers = _readers(db, person)
    assert "You have no campaigns yet." in console.get("/console/campaigns").text
    editor = console.get("/console/campaigns/new")
    assert editor.status_code == 200
    assert "<code>{{ city }}</code>" in editor.text and "<code>{{ unsubscribe_url }}</code>" in editor.text

    # Preview as Ann before saving: her name and field filled in, by the send path's renderer.
    preview = console.post(
        "/console/campaigns/new",
        data={**FORM, "lists": str(readers), "preview_as": "ann@example.com", "action": "preview"},
    )
    assert preview.status_code == 200, preview.text
    assert 'id="preview-subject">Hello Ann</span>' in preview.text
    assert "Hi Ann" in preview.text and "You live in Oslo" in preview.text
    assert "Hi Ann, in plain text." in preview.text  # the hand-written text part
    assert "alert(1)" not in preview.text.split('id="live-preview"')[1]
    unknown = console.post(
        "/console/campaigns/new", data={**FORM, "preview_as": "nobody@example.com", "action": "preview"}
    )
    assert unknown.status_code == 404 and "Contact not found." in unknown.text
    # Half-typed: a preview still shows (no 500 from an empty sender or subject).
    blank = console.post(
        "/console/campaigns/new",
        data={**FORM, "from_email": "", "from_name": "A\nB", "subject": "", "action": "preview"},
    )
    assert blank.status_code == 200, blank.text
    assert console.get("/console/campaigns", params={"page": 10**15}).status_code == 200

    # A save the API's model refuses keeps what was typed.
    refused = console.post("/console/campaigns/new", data={**FORM, "from_email": "", "action": "save"})
    assert refused.status_code == 422 and "from_email: The from email field is required." in refused.text
    assert 'value="November news"' in refused.text
    saved = console.post("/console/campaigns/new", data={**FORM, "lists": str(readers), "action": "save"})
    assert saved.status_code == 303, saved.text
    campaign_id = int(saved.headers["location"].split("/")[-1].split("?")[0])
    stored = _campaign(db, campaign_id)
    assert stored.html.startswith("<h1>Hi {{ first_name | friend }}</h1>")
    assert '<a href="https://example.com/a">Read</a>' in stored.html and "script" not in stored.html
    assert (stored.preheader, stored.reply_to, stored.track_opens) == (
        "What happened in November",
        "replies@example.com",
        True,
    )
    assert stored.text == "Hi {{ first_name | friend }}, in plain text."

    # Pasted html: its <style> rules written into the elements, and cleaned.
    pasted = {
        **FORM,
        "body_format": "html",
        "body": "<style>p{color:red}</style><p onclick='x()'>Hi</p>",
        "track_opens": "",
        "text": "",
    }
    assert (
        console.post(f"/console/campaigns/{campaign_id}", data={**pasted, "action": "save"}).status_code
        == 303
    )
    edited = _campaign(db, campaign_id)
    assert edited.html == '<p style="color: red;">Hi</p>'
    assert edited.track_opens is False and edited.text is None
    listed = console.get("/console/campaigns").text
    assert f'href="/console/campaigns/{campaign_id}">November news</a>' in listed and "draft" in listed
    shown = console.get(f"/console/campaigns/{campaign_id}", params={"preview_as": "ann@example.com"})
    assert shown.status_code == 200 and "Preview as ann@example.com" in shown.text


def test_a_test_email_reaches_the_signed_in_person(
    console: TestClient, db: Session, person: Person, relay: SmtpSink
) -> None:
    readers = _readers(db, person)
    saved = console.post("/console/campaigns/new", data={**FORM, "lists": str(readers), "action": "save"})
    page = saved.headers["location"].split("?")[0]
    tested = console.post(page + "/test")
    assert tested.status_code == 303, tested.text
    [received] = relay.received
    assert received.recipients == [person.email]
    assert str(received.message["Subject"]) == "[Test] Hello friend"
    assert f"A test email was sent to {person.email}." in console.get(tested.headers["location"]).text


def test_send_pause_resume_and_cancel_each_after_a_question(
    console: TestClient, db: Session, person: Person
) -> None:
    readers = _readers(db, person)
    saved = console.post("/console/campaigns/new", data={**FORM, "lists": str(readers), "action": "save"})
    page = saved.headers["location"].split("?")[0]
    campaign_id = int(page.split("/")[-1])

    asked = console.post(page + "/control", data={"action": "send"})
    assert asked.headers["location"] == page + "?confirm=send"
    question = console.get(asked.headers["location"]).text
    assert "Send this campaign now?" in question and 'name="confirmed" value="yes"' in question
    assert _campaign(db, campaign_id).scheduled_at is None
    sent = console.post(page + "/control", data={"action": "send", "confirmed": "yes"})
    assert sent.status_code == 303, sent.text
    assert _campaign(db, campaign_id).scheduled_at is not None
    again = console.post(page + "/control", data={"action": "send", "confirmed": "yes"})
    assert again.status_code == 409 and "already scheduled" in again.text  # the API's refusal

    # Scheduled and not started: pause, resume, then unschedule back to a draft.
    for action, check in (
        ("pause", lambda c: c.held_at is not None),
        ("resume", lambda c: c.held_at is None),
        ("unschedule", lambda c: c.scheduled_at is None),
    ):
        assert (
            console.post(page + "/control", data={"action": action})
            .headers["location"]
            .endswith(f"?confirm={action}")
        )
        done = console.post(page + "/control", data={"action": action, "confirmed": "yes"})
        assert done.status_code == 303, (action, done.text)
        assert check(_campaign(db, campaign_id)), action
    refused = console.post(page + "/control", data={"action": "resume", "confirmed": "yes"})
    assert refused.status_code == 409 and "only a paused one" in refused.text

    # Scheduled for a time, then cancelled for good: the editor is gone.
    at = (utcnow() + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M")
    asked = console.post(page + "/control", data={"action": "schedule", "scheduled_at": at})
    assert asked.headers["location"] == f"{page}?confirm=schedule&at={at}"
    assert f"It will start at {at}" in console.get(asked.headers["location"]).text
    scheduled = console.post(
        page + "/control", data={"action": "schedule", "scheduled_at": at, "confirmed": "yes"}
    )
    assert scheduled.status_code == 303, scheduled.text
    assert _campaign(db, campaign_id).scheduled_at is not None
    cancelled = console.post(page + "/control", data={"action": "cancel", "confirmed": "yes"})
    assert cancelled.status_code == 303
    assert _campaign(db, campaign_id).cancelled_at is not None
    after = console.get(page).text
    assert "cancelled" in after and 'name="body"' not in after and "Send a test" not in after
    assert console.post(page + "/control", data={"action": "launch", "confirmed": "yes"}).status_code == 400


def test_the_report_shows_progress_charts_and_figures(
    console: TestClient, db: Session, person: Person
) -> None:
    readers = _readers(db, person)
    saved = console.post("/console/campaigns/new", data={**FORM, "lists": str(readers), "action": "save"})
    campaign_id = int(saved.headers["location"].split("/")[-1].split("?")[0])
    campaign = _campaign(db, campaign_id)
    start = utcnow().replace(minute=5, second=0, microsecond=0) - timedelta(hours=3)
    campaign.scheduled_at = campaign.sent_at = start
    contacts = list(db.scalars(select(Contact).where(Contact.account_id == person.account_id)))
    for index, contact in enumerate(contacts):
        db.add(
            Deliverable(
                account_id=person.account_id,
                campaign_id=campaign_id,
                contact_id=contact.id,
                state=DeliverableState.SENT,
                send_after=start,
                sent_at=start,
                opened_at=start + timedelta(hours=1) if index == 0 else None,
                clicked_at=start + timedelta(hours=2) if index == 0 else None,
            )
        )
    db.flush()
    first = db.scalars(select(Deliverable).where(Deliverable.campaign_id == campaign_id)).first()
    assert first is not None
    for url in ("https://example.com/a", "https://example.com/a", "https://example.com/b"):
        db.add(LinkClick(campaign_id=campaign_id, deliverable_id=first.id, url=url, clicked_at=start))
    db.flush()
    report = console.get(f"/console/campaigns/{campaign_id}/report")
    assert report.status_code == 200, report.text
    text = report.text
    assert "sent: 100% done" in text and '<dd id="sent-count">2</dd>' in text
    assert '<dd id="open-count">1 (50.0% of sent)</dd>' in text
    assert text.count('<svg class="chart"') == 4 and 'aria-label="First opens over time"' in text
    assert '<td class="url">https://example.com/a</td><td>2</td><td>1</td>' in text
    assert "data-refresh" not in text  # sending is over: nothing to refresh
    assert f'href="/console/campaigns/{campaign_id}/report"' in console.get("/console/campaigns").text


def test_other_accounts_automation_emails_and_cross_site_posts(
    console: TestClient, db: Session, person: Person, make_person: Callable[..., Person]
) -> None:
    stranger = make_person("stranger")
    theirs = Campaign(
        account_id=stranger.account_id,
        title="T",
        subject="S",
        html="<p>x</p>",
        from_name="S",
        from_email="s@example.com",
    )
    automation = Automation(account_id=person.account_id, user_id=person.user_id, title="Drip")
    db.add_all([theirs, automation])
    db.flush()
    email = Campaign(
        account_id=person.account_id,
        automation_id=automation.id,
        title="Step",
        subject="S",
        html="<p>x</p>",
        from_name="A",
        from_email="a@example.com",
    )
    db.add(email)
    db.flush()
    for campaign_id in (theirs.id, email.id):
        assert console.get(f"/console/campaigns/{campaign_id}").status_code == 404
        assert console.get(f"/console/campaigns/{campaign_id}/report").status_code == 404
        assert (
            console.post(
                f"/console/campaigns/{campaign_id}/control", data={"action": "pause", "confirmed": "yes"}
            ).status_code
            == 404
        )
        assert console.post(f"/console/campaigns/{campaign_id}/test").status_code == 404
    foreign = console.post(
        "/console/campaigns/new", data={**FORM, "action": "save"}, headers={"Origin": "https://evil.example"}
    )
    assert foreign.status_code == 403
    assert (
        db.scalars(
            select(Campaign).where(Campaign.account_id == person.account_id, Campaign.automation_id.is_(None))
        ).first()
        is None
    )
