"""Preview (GET /campaigns/{id}/preview) and test sends (POST /campaigns/{id}/test): the preview is what
the worker sends to that contact (but for the signed tokens and the per-message ids), its links work and
count nothing; test emails reach the relay with `[Test] ` before the subject, counted nowhere,
suppressions ignored, at most 10 addresses, limited per account."""

from __future__ import annotations

import email
import email.policy
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.config import Settings
from app.models import Deliverable
from tests.conftest import ApiUser
from tests.mail.sending.conftest import Sender, SmtpSink, campaign_with_list
from tests.smtp_sink import running_sink


@pytest.fixture(autouse=True)
def relay(settings: Settings, smtp_sink: SmtpSink) -> SmtpSink:
    """The app's own emails (test sends) go to the loopback SMTP server."""
    settings.smtp_url = smtp_sink.url
    return smtp_sink


TOKENS = re.compile(r"/(t/c|t/o|u|w)/[A-Za-z0-9_.\-]+")


def untokened(text: str) -> str:
    return TOKENS.sub(r"/\1/TOKEN", text)


def preview(client: TestClient, user: ApiUser, campaign_id: int, **query: Any) -> Any:
    return client.get(f"/campaigns/{campaign_id}/preview", params=query, headers=user.headers)


def test_the_preview_is_what_the_worker_sends_that_contact(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink
) -> None:
    campaign_id = campaign_with_list(client, api_user.headers, ["ann@example.com"])
    client.post("/contacts", json={"email": "ann@example.com", "first_name": "Ann"}, headers=api_user.headers)
    contact_id = client.get(
        "/contacts", params={"email": "ann@example.com"}, headers=api_user.headers
    ).json()["data"][0]["id"]
    by_id = preview(client, api_user, campaign_id, contact_id=contact_id)
    assert by_id.status_code == 200, by_id.text
    shown = by_id.json()
    assert preview(client, api_user, campaign_id, email="ANN@example.com").json() == shown
    assert shown["subject"] == "Hello Ann"
    assert "Hi Ann" in shown["html"] and "Hi Ann" in shown["text"]
    client.post(f"/campaigns/{campaign_id}/send", headers=api_user.headers)
    assert sender.drain() == 1
    [received] = smtp_sink.received
    assert str(received.message["Subject"]) == shown["subject"]
    assert str(received.message["To"]) == shown["to"]
    assert untokened(received.part("html")) == untokened(shown["html"])
    assert untokened(received.part("plain")) == untokened(shown["text"])
    # Its links go where the email's go, and count nothing.
    link = re.search(r'href="[^"]*(/t/c/[^"]+)"', shown["html"])
    assert link is not None
    redirect = client.get(link.group(1), follow_redirects=False)
    assert redirect.status_code in (302, 303, 307), redirect.text
    assert redirect.headers["location"] == "https://example.com/a?x=1&y=2"
    stats = client.get(f"/campaigns/{campaign_id}/stats", headers=api_user.headers).json()
    assert stats["unique_click_count"] == 0


def test_the_raw_message_and_a_reader_without_names(client: TestClient, api_user: ApiUser) -> None:
    campaign_id = campaign_with_list(client, api_user.headers, [])
    raw = preview(client, api_user, campaign_id, format="eml")
    assert raw.status_code == 200
    assert raw.headers["content-type"].startswith("message/rfc822")
    message = email.message_from_bytes(raw.content, policy=email.policy.default)
    assert str(message["Subject"]) == "Hello friend"
    assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert message.get_content_type() == "multipart/alternative"


def test_unknown_contacts_campaigns_and_formats(
    client: TestClient, api_user: ApiUser, make_user: Any
) -> None:
    campaign_id = campaign_with_list(client, api_user.headers, [])
    other = make_user("other@example.com")
    theirs = campaign_with_list(client, other.headers, ["theirs@example.com"])
    assert preview(client, api_user, theirs).status_code == 404
    assert preview(client, api_user, campaign_id, email="theirs@example.com").status_code == 404
    assert preview(client, api_user, campaign_id, contact_id=999_999).status_code == 404
    assert preview(client, api_user, campaign_id, format="pdf").status_code == 422
    assert preview(client, api_user, campaign_id, contact_id="x").status_code == 422
    assert (
        client.post(
            f"/campaigns/{theirs}/test", json={"emails": ["me@example.com"]}, headers=api_user.headers
        ).status_code
        == 404
    )


def test_a_test_send_reaches_the_relay_marked_and_counted_nowhere(
    client: TestClient, api_user: ApiUser, smtp_sink: SmtpSink, db: Session
) -> None:
    campaign_id = campaign_with_list(client, api_user.headers, ["ann@example.com"])
    client.post("/contacts", json={"email": "ann@example.com", "first_name": "Ann"}, headers=api_user.headers)
    suppressed = client.post("/suppressions", json={"email": "blocked@example.com"}, headers=api_user.headers)
    assert suppressed.status_code in (200, 201), suppressed.text
    answer = client.post(
        f"/campaigns/{campaign_id}/test",
        json={"emails": ["ann@example.com", "blocked@example.com", "ann@example.com"]},
        headers=api_user.headers,
    )
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"sent_to": ["ann@example.com", "blocked@example.com"]}
    subjects = {r.recipients[0]: str(r.message["Subject"]) for r in smtp_sink.received}
    assert subjects == {"ann@example.com": "[Test] Hello Ann", "blocked@example.com": "[Test] Hello friend"}
    assert db.scalar(select(func.count()).select_from(Deliverable)) == 0
    campaign = client.get(f"/campaigns/{campaign_id}", headers=api_user.headers).json()
    assert (campaign["sending_state"], campaign["sent_count"]) == ("draft", 0)


def test_a_test_send_takes_one_to_ten_addresses(
    client: TestClient, api_user: ApiUser, smtp_sink: SmtpSink
) -> None:
    campaign_id = campaign_with_list(client, api_user.headers, [])
    for emails in ([], [f"r{n}@example.com" for n in range(11)], ["not an address"]):
        answer = client.post(
            f"/campaigns/{campaign_id}/test", json={"emails": emails}, headers=api_user.headers
        )
        assert answer.status_code == 422, answer.text
    assert smtp_sink.received == []


def test_test_sends_are_limited_per_account(
    client: TestClient, api_user: ApiUser, smtp_sink: SmtpSink
) -> None:
    campaign_id = campaign_with_list(client, api_user.headers, [])
    answers = [
        client.post(
            f"/campaigns/{campaign_id}/test", json={"emails": ["me@example.com"]}, headers=api_user.headers
        )
        for _ in range(31)
    ]
    assert [a.status_code for a in answers] == [200] * 30 + [429]
    assert "Retry-After" in answers[-1].headers
    assert len(smtp_sink.received) == 30


def test_a_relay_that_refuses_every_address_is_a_503(
    client: TestClient, api_user: ApiUser, smtp_sink: SmtpSink
) -> None:
    campaign_id = campaign_with_list(client, api_user.headers, [])
    smtp_sink.refuse["me@example.com"] = "550 5.1.1 no such user"
    answer = client.post(
        f"/campaigns/{campaign_id}/test", json={"emails": ["me@example.com"]}, headers=api_user.headers
    )
    assert answer.status_code == 503
    assert answer.headers["Retry-After"] == "60"


def test_a_test_send_goes_through_the_from_domains_own_relay(
    client: TestClient, api_user: ApiUser, smtp_sink: SmtpSink, settings: Settings
) -> None:
    """TIDINGS_SMTP_URL may give a sending domain relays of its own: a test email goes where the
    campaign's own emails would."""
    with running_sink() as own:
        settings.smtp_url = f"{smtp_sink.url}, {own.url}?domains=example.com"
        campaign_id = campaign_with_list(client, api_user.headers, ["ann@example.com"])  # news@example.com
        answer = client.post(
            f"/campaigns/{campaign_id}/test", json={"emails": ["me@example.net"]}, headers=api_user.headers
        )
        assert answer.status_code == 200, answer.text
        assert [r.recipients for r in own.received] == [["me@example.net"]]
        assert smtp_sink.received == []
