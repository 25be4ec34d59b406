"""End to end: a campaign sent to the loopback SMTP server, then its open pixel, click redirects and
unsubscribe links followed from the received email."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.config import Settings
from app.mail.sending.tokens import MailTokens
from tests.conftest import ApiUser
from tests.mail.sending.conftest import Sender, SmtpSink, campaign_with_list
from tests.mail.sending.emails import Links, contact_id_of, deliverables_of, links_in, stats_of

ANN, BOB = "ann@example.com", "bob@example.com"


def send_campaign(client: TestClient, user: ApiUser, sender: Sender, emails: list[str], **body: Any) -> int:
    campaign_id = campaign_with_list(client, user.headers, emails, **body)
    response = client.post(f"/campaigns/{campaign_id}/send", headers=user.headers)
    assert response.status_code == 200, response.text
    assert sender.drain() == len(emails)
    return campaign_id


def links_to(smtp_sink: SmtpSink, address: str) -> Links:
    received = smtp_sink.to(address)
    assert len(received) == 1
    return links_in(received[-1])


def test_open_pixel_is_a_transparent_gif_counted_once(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink, db: Session
) -> None:
    campaign_id = send_campaign(client, api_user, sender, [ANN, BOB])
    links = links_to(smtp_sink, ANN)

    first = client.get(links.pixel)
    assert first.status_code == 200
    assert first.headers["content-type"] == "image/gif"
    assert first.headers["cache-control"] == "no-store"
    assert first.content.startswith(b"GIF89a") and len(first.content) == 42
    opened_at = deliverables_of(db, ANN)[0].opened_at
    assert opened_at is not None

    again = client.get(links.pixel)
    assert again.status_code == 200 and again.content == first.content
    assert deliverables_of(db, ANN)[0].opened_at == opened_at
    assert deliverables_of(db, BOB)[0].opened_at is None
    stats = stats_of(client, api_user.headers, campaign_id)
    assert (stats["sent_count"], stats["unique_open_count"], stats["open_rate"]) == (2, 1, 50.0)
    assert stats["unique_click_count"] == 0


def test_click_redirects_to_exactly_the_signed_url_and_counts_as_an_open(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink, db: Session
) -> None:
    campaign_id = send_campaign(client, api_user, sender, [ANN, BOB])
    links = links_to(smtp_sink, ANN)
    assert len(links.clicks) == 1

    response = client.get(links.clicks[0], follow_redirects=False)
    assert response.status_code == 302
    # The campaign's href was `https://example.com/a?x=1&amp;y=2`: the html entity is not part of the URL.
    assert response.headers["location"] == "https://example.com/a?x=1&y=2"
    assert response.headers["cache-control"] == "no-store"
    row = deliverables_of(db, ANN)[0]
    assert row.clicked_at is not None
    assert row.opened_at == row.clicked_at  # no open was recorded before: the click is the first open

    again = client.get(links.clicks[0], follow_redirects=False)
    assert again.status_code == 302
    assert again.headers["location"] == "https://example.com/a?x=1&y=2"
    assert deliverables_of(db, ANN)[0].clicked_at == row.clicked_at
    client.get(links.pixel)  # an open after the click changes nothing either
    assert deliverables_of(db, ANN)[0].opened_at == row.opened_at
    stats = stats_of(client, api_user.headers, campaign_id)
    assert (stats["unique_open_count"], stats["unique_click_count"]) == (1, 1)
    assert (stats["open_rate"], stats["click_rate"]) == (50.0, 50.0)


def test_a_click_after_an_open_keeps_the_open_time(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink, db: Session
) -> None:
    send_campaign(client, api_user, sender, [ANN])
    links = links_to(smtp_sink, ANN)
    client.get(links.pixel)
    opened_at = deliverables_of(db, ANN)[0].opened_at
    assert client.get(links.clicks[0], follow_redirects=False).status_code == 302
    row = deliverables_of(db, ANN)[0]
    assert row.opened_at == opened_at
    assert row.clicked_at is not None and row.clicked_at >= opened_at


def test_each_link_redirects_to_its_own_url_and_unusual_characters_are_encoded(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink
) -> None:
    html = (
        '<p><a href="https://example.com/one">One</a>'
        ' <a href="http://example.org/caf\u00e9?q=a b">Two</a>'
        ' <a href="mailto:hi@example.com">Mail</a>'
        ' <a href="https://example.com/x?n={{ first_name }}">Me</a></p>'
    )
    send_campaign(client, api_user, sender, [ANN], html=html)
    links = links_to(smtp_sink, ANN)
    locations = [client.get(path, follow_redirects=False).headers["location"] for path in links.clicks]
    assert locations == [
        "https://example.com/one",
        "http://example.org/caf%C3%A9?q=a%20b",
        "https://example.com/x?n=",
    ]


def tampered(token: str) -> str:
    # Change a character of the signature (the part after the last dot) to another valid one. Not the
    # last: its low bits are base64 padding, and changing only those leaves the same signature.
    at = len(token) - 3
    return token[:at] + ("A" if token[at] != "A" else "B") + token[at + 1 :]


def test_forged_tampered_and_misused_tokens_are_404(
    client: TestClient,
    api_user: ApiUser,
    sender: Sender,
    smtp_sink: SmtpSink,
    db: Session,
    settings: Settings,
) -> None:
    send_campaign(client, api_user, sender, [ANN])
    links = links_to(smtp_sink, ANN)
    deliverable_id = deliverables_of(db, ANN)[0].id
    open_token = links.pixel.rsplit("/", 1)[1]
    click_token = links.clicks[0].rsplit("/", 1)[1]
    unsubscribe_token = links.unsubscribe.rsplit("/", 1)[1]
    forger = MailTokens("another-secret-key-that-is-long-enough-to-look-real")
    bad_opens = [tampered(open_token), forger.open_token(deliverable_id), click_token, unsubscribe_token, "x"]
    bad_clicks = [
        tampered(click_token),
        forger.click_token(deliverable_id, "https://evil.example/"),
        open_token,
        unsubscribe_token,
        # A real signature over another payload: the URL travels inside the signed token, so no
        # query parameter or path can change where the redirect goes.
        click_token.replace(".", "x.", 1),
        "not-a-token",
    ]
    bad_unsubscribes = [tampered(unsubscribe_token), forger.unsubscribe_token(deliverable_id), open_token]

    for token in bad_opens:
        response = client.get(f"/t/o/{token}")
        assert response.status_code == 404, token
    for token in bad_clicks:
        response = client.get(f"/t/c/{token}", follow_redirects=False)
        assert response.status_code == 404, token
        assert "location" not in response.headers
    for token in bad_unsubscribes:
        assert client.get(f"/u/{token}").status_code == 404, token
        response = client.post(f"/u/{token}", data={"List-Unsubscribe": "One-Click"})
        assert response.status_code == 404, token
        assert response.headers["content-type"].startswith("text/html")
    # A signed click token for a javascript: URL (render.py never makes one) is refused all the same.
    signed_script = MailTokens(settings.resolved_secret_key).click_token(
        deliverable_id, "javascript:alert(1)"
    )
    assert client.get(f"/t/c/{signed_script}", follow_redirects=False).status_code == 404

    row = deliverables_of(db, ANN)[0]
    assert (row.opened_at, row.clicked_at, row.unsubscribed_at) == (None, None, None)
    contact = client.get(
        f"/contacts/{contact_id_of(client, api_user.headers, ANN)}", headers=api_user.headers
    )
    assert contact.json()["unsubscribed_at"] is None


def test_unsubscribe_page_asks_first_and_get_never_unsubscribes(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink
) -> None:
    send_campaign(client, api_user, sender, [ANN], from_name="Ann's <News>")
    links = links_to(smtp_sink, ANN)
    for _ in range(2):
        page = client.get(links.unsubscribe)
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert page.headers["cache-control"] == "no-store"
        html = page.text
        assert '<html lang="en">' in html
        assert "<title>Unsubscribe</title>" in html
        assert html.count("<form") == 1 and html.count("<button") == 1
        assert 'method="post"' in html and "action=" not in html  # it posts back to this address
        assert "aria-labelledby=" in html
        assert "Ann&#x27;s &lt;News&gt;" in html  # the sender's name is escaped
    contact_id = contact_id_of(client, api_user.headers, ANN)
    assert client.get(f"/contacts/{contact_id}", headers=api_user.headers).json()["unsubscribed_at"] is None


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        (b"List-Unsubscribe=One-Click", {"Content-Type": "application/x-www-form-urlencoded"}),
        (b"", {}),
    ],
    ids=["rfc8058-one-click", "empty-body"],
)
def test_post_unsubscribes_once_and_the_api_and_stats_show_it(
    client: TestClient,
    api_user: ApiUser,
    sender: Sender,
    smtp_sink: SmtpSink,
    db: Session,
    body: bytes,
    headers: dict[str, str],
) -> None:
    campaign_id = send_campaign(client, api_user, sender, [ANN, BOB])
    links = links_to(smtp_sink, ANN)

    response = client.post(links.unsubscribe, content=body, headers=headers)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "You are unsubscribed" in response.text and '<html lang="en">' in response.text
    contact_id = contact_id_of(client, api_user.headers, ANN)
    contact = client.get(f"/contacts/{contact_id}", headers=api_user.headers).json()
    assert contact["unsubscribed_at"] is not None
    unsubscribed = client.get("/contacts/unsubscribed", headers=api_user.headers).json()
    assert [c["email"] for c in unsubscribed["data"]] == [ANN]
    row = deliverables_of(db, ANN)[0]
    assert row.unsubscribed_at is not None

    # A second POST (a client retrying, the page's own button) answers the same and changes nothing.
    again = client.post(links.unsubscribe)
    assert again.status_code == 200
    assert client.get(f"/contacts/{contact_id}", headers=api_user.headers).json() == contact
    assert deliverables_of(db, ANN)[0].unsubscribed_at == row.unsubscribed_at
    stats = stats_of(client, api_user.headers, campaign_id)
    assert (stats["unsubscribe_count"], stats["unsubscribe_rate"]) == (1, 50.0)


def test_an_unsubscribed_contact_gets_no_later_campaign(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink
) -> None:
    send_campaign(client, api_user, sender, [ANN, BOB])
    assert client.post(links_to(smtp_sink, ANN).unsubscribe).status_code == 200
    list_id = client.get("/lists", headers=api_user.headers).json()["data"][0]["id"]
    second = {
        "title": "Second",
        "subject": "Again",
        "html": "<p>Again</p>",
        "from_name": "Tidings",
        "from_email": "news@example.com",
        "lists": [list_id],
    }
    campaign_id = client.post("/campaigns", json=second, headers=api_user.headers).json()["id"]
    assert client.post(f"/campaigns/{campaign_id}/send", headers=api_user.headers).status_code == 200
    assert sender.drain() == 1
    assert len(smtp_sink.to(ANN)) == 1 and len(smtp_sink.to(BOB)) == 2


def test_tracking_routes_need_no_credentials_and_stay_out_of_the_api_description(
    client: TestClient,
) -> None:
    document = yaml.safe_load(client.get("/openapi.yaml").text)
    for path in document["paths"]:
        # The relay's own bounce webhook stays out; the provider webhooks are documented (extensions).
        assert not path.startswith(("/t/", "/u/")) and path != "/webhooks/bounces", path
    # Unknown tokens answer 404, not 401: the routes are public.
    assert client.get("/t/o/nothing").status_code == 404
    assert client.get("/t/c/nothing", follow_redirects=False).status_code == 404
    assert client.get("/u/nothing").status_code == 404
    assert client.post("/u/nothing").status_code == 404


def test_every_click_is_kept_with_its_url_and_the_report_counts_them_per_link(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink
) -> None:
    html = (
        '<p>Hi</p><a href="https://example.com/a">A</a><a href="https://example.com/b?who={{ email }}">B</a>'
    )
    campaign_id = send_campaign(client, api_user, sender, [ANN, BOB], html=html)
    ann, bob = links_to(smtp_sink, ANN), links_to(smtp_sink, BOB)
    for path in [ann.clicks[0], ann.clicks[0], ann.clicks[1], bob.clicks[0]]:
        assert client.get(path, follow_redirects=False).status_code == 302
    # A preview's links work and count nothing.
    shown = client.get(f"/campaigns/{campaign_id}/preview", headers=api_user.headers).json()["html"]
    preview_click = shown.split('href="', 2)[1].split('"', 1)[0]
    assert client.get(urlsplit(preview_click).path, follow_redirects=False).status_code == 302
    report = client.get(f"/campaigns/{campaign_id}/report", headers=api_user.headers).json()
    assert report["links"] == [
        {"url": "https://example.com/a", "clicks": 3, "unique_clickers": 2},
        {"url": f"https://example.com/b?who={ANN.replace('@', '%40')}", "clicks": 1, "unique_clickers": 1},
    ]
    assert stats_of(client, api_user.headers, campaign_id)["unique_click_count"] == 2
