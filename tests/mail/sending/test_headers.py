"""The headers receivers reward, on every email a real send worker hands to the loopback SMTP server,
each parsed with the standard library's strict policy: List-Id of the campaign's list, Feedback-ID,
header lines under 78 characters, alt text in a quoted-printable text part, a Message-ID under the
From domain that tells no count, EHLO with the base URL's host."""

from __future__ import annotations

import asyncio
import email
import email.policy
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.mail.sending.transport import SmtpTransport
from tests.conftest import ApiUser
from tests.mail.sending.conftest import Sender, SmtpSink, campaign_with_list

BASE = "https://mail.example.com"
HTML = (
    '<p>Hello {{ first_name | "there" }}</p>'
    '<img src="https://example.com/sale.png" alt="Half price: all week">'
)


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"base_url": BASE, "bounce_domain": "bounces.example.com"})


def test_every_sent_email_carries_the_headers_and_parses_strictly(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink
) -> None:
    recipients = ["ann@example.com", "a-rather-long-local-part-for-folding@subdomain.example.com"]
    campaign_id = campaign_with_list(client, api_user.headers, recipients, html=HTML)
    list_id = client.get(f"/campaigns/{campaign_id}", headers=api_user.headers).json()["lists"][0]
    assert client.post(f"/campaigns/{campaign_id}/send", headers=api_user.headers).status_code == 200
    assert sender.drain() == 2
    for received in smtp_sink.received:
        head = received.data.split(b"\r\n\r\n", 1)[0]
        assert all(len(line) <= 78 for line in head.split(b"\r\n")), head.decode()
        message: Any = email.message_from_bytes(received.data, policy=email.policy.strict)
        assert message["List-Id"] == f"<list-{list_id}.mail.example.com>"
        assert message["Feedback-ID"] == f"{campaign_id}:{api_user.account_id}:{list_id}:tidings"
        unsubscribe = " ".join(str(message["List-Unsubscribe"]).split())
        assert unsubscribe.startswith(f"<{BASE}/u/") and "<mailto:unsubscribe+" in unsubscribe
        text = message.get_body(("plain",)).get_content()
        assert "Half price: all week" in text
        assert message.get_body(("plain",))["Content-Transfer-Encoding"] == "quoted-printable"
        # Message-ID under the From domain, and opaque: only the secret key reads the email from it.
        token, _, domain = str(message["Message-ID"]).strip("<>").partition("@")
        assert domain == "example.com" and re.fullmatch("[0-9a-f]{32}", token)
        assert sender.tokens.read_message_id_token(token) is not None


@pytest.mark.parametrize(
    ("update", "expected"),
    [
        ({"base_url": BASE}, "mail.example.com"),
        ({"base_url": BASE, "smtp_helo_name": "out1.example.com"}, "out1.example.com"),
        ({"base_url": "http://192.0.2.7:8000"}, "[192.0.2.7]"),
        ({}, None),  # no base URL set: the machine's own name, as before
    ],
)
def test_ehlo_gives_the_base_urls_host_or_the_setting(
    smtp_sink: SmtpSink, update: dict[str, str], expected: str | None
) -> None:
    settings = Settings(**update)
    assert settings.ehlo_name == expected
    if expected is None:
        return
    transport = SmtpTransport(smtp_sink.url, 1, local_name=settings.ehlo_name)

    async def send() -> None:
        try:
            await transport.send("news@example.com", "ann@example.com", b"Subject: hi\r\n\r\nhi\r\n")
        finally:
            await transport.close()

    asyncio.run(send())
    assert smtp_sink.ehlo_names == [expected]
