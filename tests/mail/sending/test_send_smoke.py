"""End to end: a campaign sent to the loopback SMTP server."""

from __future__ import annotations

from typing import Any

from tests.mail.sending.conftest import Sender, SmtpSink, campaign_with_list


def test_sends_each_recipient_once(client: Any, api_user: Any, sender: Sender, smtp_sink: SmtpSink) -> None:
    emails = ["ann@example.com", "bob@example.com"]
    campaign_id = campaign_with_list(client, api_user.headers, emails)
    assert client.post(f"/campaigns/{campaign_id}/send", headers=api_user.headers).status_code == 200
    assert sender.drain() == 2
    assert sorted(r.recipients[0] for r in smtp_sink.received) == emails
    message = smtp_sink.to("ann@example.com")[0]
    assert message.message["Subject"] == "Hello friend"
    assert message.message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert "/t/c/" in message.part("html")
    assert "/t/c/" in message.part("plain")
    assert sender.drain() == 0
