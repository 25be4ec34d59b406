"""The parts of an email beyond SendFox's fields: a hand-written text part, a hidden preheader, Reply-To
and the open pixel's switch (per campaign, and per account through PATCH /me), as the API takes and
shows them and as real sends, automation emails, the preview and test sends carry them."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.mail.sending.render import Recipient, compile_campaign, render
from app.mail.sending.tokens import MailTokens
from tests.conftest import ApiUser
from tests.mail.sending.conftest import Sender, SmtpSink, campaign_with_list
from tests.mail.sending.test_render import html_of, parsed, text_of

TOKENS = MailTokens("parts-test-secret-key-long-enough-to-sign")
BASE = "https://mail.example.com"
HTML = (
    '<html><body><p>Hi {{ first_name | "there" }}</p><a href="https://example.com/a">Read</a></body></html>'
)
PIXEL = re.compile(r'<img src="[^"]*/t/o/')
CLICK = re.compile(r"https://mail\.example\.com/t/c/[A-Za-z0-9_.\-]+")


@pytest.fixture(autouse=True)
def relay(settings: Settings, smtp_sink: SmtpSink) -> SmtpSink:
    """Test sends go to the loopback SMTP server too."""
    settings.smtp_url = smtp_sink.url
    return smtp_sink


def rendered(**parts: Any) -> Any:
    compiled = compile_campaign(7, "Hi", HTML, "Sender", "news@example.com", **parts)
    recipient = Recipient(42, "ann@example.com", "Ann", None, {"plan": "gold"})
    return render(compiled, recipient, TOKENS, BASE)


# ------------------------------------------------------------------------------------------ rendering


def test_a_hand_written_text_part_is_sent_as_written_with_tags_filled_and_urls_tracked() -> None:
    text = 'Dear {{ first_name }} ({{ plan | "basic" }}),\nsee https://example.com/b?x={{ email }}.\nBye'
    got = text_of(rendered(text_source=text))
    lines = got.splitlines()
    assert lines[0] == "Dear Ann (gold),"
    # The URL is a tracked link; the sentence's full stop stays outside it.
    assert CLICK.fullmatch(lines[1].removeprefix("see ").removesuffix(".")), lines[1]
    assert "Bye" in got and "Unsubscribe: https://mail.example.com/u/" in got
    assert "Hi Ann" not in got  # not made from the html
    # Blank means "make it from the html", as before.
    assert "Hi Ann" in text_of(rendered(text_source="  \n"))


def test_a_text_part_with_its_own_unsubscribe_tag_gets_no_footer() -> None:
    got = text_of(rendered(text_source="Leave: {{ unsubscribe_url }}"))
    assert got.count("/u/") == 1 and "Unsubscribe:" not in got


def test_the_preheader_opens_the_body_hidden_and_escaped() -> None:
    got = html_of(rendered(preheader='Ann & {{ first_name | "you" }} <b>'))
    body = got.split("<body>", 1)[1]
    assert body.startswith('<div style="display:none;'), body[:80]
    assert "Ann &amp; Ann &lt;b&gt;" in body
    assert body.index("display:none") < body.index("Hi Ann")
    # Not part of the text made from the html.
    assert "&amp;" not in text_of(rendered(preheader="Ann & co")) and "Ann & co" not in text_of(
        rendered(preheader="Ann & co")
    )


def test_reply_to_and_the_open_pixel_switch() -> None:
    message = parsed(rendered(reply_to="replies@exämple.com"))
    assert message["Reply-To"] == "replies@xn--exmple-cua.com"
    assert PIXEL.search(html_of(rendered()))
    assert not PIXEL.search(html_of(rendered(track_opens=False)))
    assert parsed(rendered())["Reply-To"] is None


# ------------------------------------------------------------------------------------------------ API


def test_the_parts_are_taken_shown_changed_and_cleared(client: TestClient, api_user: ApiUser) -> None:
    campaign_id = campaign_with_list(client, api_user.headers, [])
    shown = client.get(f"/campaigns/{campaign_id}", headers=api_user.headers).json()
    assert (shown["text"], shown["preheader"], shown["reply_to"], shown["track_opens"]) == (
        None,
        None,
        None,
        True,
    )
    given = {"text": "Plain", "preheader": "Soon", "reply_to": "desk@example.com", "track_opens": False}
    campaign_id = campaign_with_list(client, api_user.headers, [], **given)
    shown = client.get(f"/campaigns/{campaign_id}", headers=api_user.headers).json()
    assert {name: shown[name] for name in given} == given
    changed = client.patch(
        f"/campaigns/{campaign_id}",
        json={"text": "", "reply_to": None, "track_opens": True},
        headers=api_user.headers,
    )
    assert changed.status_code == 200, changed.text
    body = changed.json()
    assert (body["text"], body["preheader"], body["reply_to"], body["track_opens"]) == (
        None,
        "Soon",
        None,
        True,
    )
    # What a PATCH does not name stays.
    kept = client.patch(f"/campaigns/{campaign_id}", json={"title": "T"}, headers=api_user.headers).json()
    assert kept["preheader"] == "Soon"


@pytest.mark.parametrize(
    "body",
    [
        {"reply_to": "not an address"},
        {"track_opens": None},
        {"preheader": "x" * 256},
        {"track_opens": "maybe"},
    ],
)
def test_bad_parts_are_422(client: TestClient, api_user: ApiUser, body: dict[str, Any]) -> None:
    campaign_id = campaign_with_list(client, api_user.headers, [])
    answer = client.patch(f"/campaigns/{campaign_id}", json=body, headers=api_user.headers)
    assert answer.status_code == 422, answer.text
    assert set(answer.json()["errors"]) == set(body)


def test_the_account_switch_is_shown_and_set_on_me(client: TestClient, api_user: ApiUser) -> None:
    assert client.get("/me", headers=api_user.headers).json()["track_opens"] is True
    answer = client.patch("/me", json={"track_opens": False}, headers=api_user.headers)
    assert answer.status_code == 200, answer.text
    assert answer.json()["track_opens"] is False
    assert client.get("/me", headers=api_user.headers).json()["track_opens"] is False
    assert client.patch("/me", json={"track_opens": "maybe"}, headers=api_user.headers).status_code == 422
    assert client.patch("/me", json={}, headers=api_user.headers).json()["track_opens"] is False


# -------------------------------------------------------------------------------------- what is sent


def test_a_real_send_carries_the_parts(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink
) -> None:
    campaign_id = campaign_with_list(
        client,
        api_user.headers,
        ["ann@example.com"],
        text="Hello {{ email }}",
        preheader="Inside: news",
        reply_to="desk@example.com",
        track_opens=False,
    )
    assert client.post(f"/campaigns/{campaign_id}/send", headers=api_user.headers).status_code == 200
    assert sender.drain() == 1
    [received] = smtp_sink.received
    assert received.message["Reply-To"] == "desk@example.com"
    assert received.part("plain").startswith("Hello ann@example.com")
    assert "Inside: news" in received.part("html") and not PIXEL.search(received.part("html"))


def test_the_account_switch_turns_the_pixel_off_for_every_campaign(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink
) -> None:
    first = campaign_with_list(client, api_user.headers, ["ann@example.com"])
    client.post(f"/campaigns/{first}/send", headers=api_user.headers)
    assert sender.drain() == 1
    assert PIXEL.search(smtp_sink.received[-1].part("html"))
    client.patch("/me", json={"track_opens": False}, headers=api_user.headers)
    second = campaign_with_list(client, api_user.headers, ["bob@example.com"])
    preview = client.get(f"/campaigns/{second}/preview", headers=api_user.headers).json()
    assert not PIXEL.search(preview["html"])
    client.post(f"/campaigns/{second}/send", headers=api_user.headers)
    assert sender.drain() == 1
    assert not PIXEL.search(smtp_sink.received[-1].part("html"))


def test_preview_and_test_send_carry_the_parts(
    client: TestClient, api_user: ApiUser, smtp_sink: SmtpSink
) -> None:
    campaign_id = campaign_with_list(
        client, api_user.headers, [], text="Just text", preheader="Peek", reply_to="desk@example.com"
    )
    shown = client.get(f"/campaigns/{campaign_id}/preview", headers=api_user.headers).json()
    assert shown["text"].startswith("Just text") and "Peek" in shown["html"]
    raw = client.get(f"/campaigns/{campaign_id}/preview", params={"format": "eml"}, headers=api_user.headers)
    assert b"Reply-To: <desk@example.com>" in raw.content
    answer = client.post(
        f"/campaigns/{campaign_id}/test", json={"emails": ["me@example.com"]}, headers=api_user.headers
    )
    assert answer.status_code == 200, answer.text
    [received] = smtp_sink.received
    assert received.message["Reply-To"] == "desk@example.com"
    assert received.part("plain").startswith("Just text")


def test_automation_emails_take_and_send_the_parts(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink
) -> None:
    list_id = client.post("/lists", json={"name": "Series"}, headers=api_user.headers).json()["id"]
    created = client.post(
        "/automations",
        json={"title": "Welcome", "active": True, "trigger_type": "apply_list", "trigger_list_id": list_id},
        headers=api_user.headers,
    ).json()
    email = {
        "subject": "Welcome",
        "html": "<p>Welcome</p>",
        "from_name": "Ann",
        "from_email": "ann@example.com",
        "delay_hours": 0,
        "text": "Welcome, in text",
        "reply_to": "desk@example.com",
        "track_opens": False,
    }
    added = client.post(f"/automations/{created['id']}/emails", json=email, headers=api_user.headers)
    assert added.status_code == 201, added.text
    assert added.json()["campaign"]["reply_to"] == "desk@example.com"
    changed = client.patch(
        f"/automation-emails/{added.json()['id']}", json={"preheader": "Glad"}, headers=api_user.headers
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["campaign"]["preheader"] == "Glad"
    client.post("/contacts", json={"email": "cy@example.com", "lists": [list_id]}, headers=api_user.headers)
    assert sender.drain() == 1
    [received] = smtp_sink.received
    assert received.message["Reply-To"] == "desk@example.com"
    assert received.part("plain").startswith("Welcome, in text")
    assert "Glad" in received.part("html") and not PIXEL.search(received.part("html"))
