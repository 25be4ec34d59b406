"""The "view in browser" link (`{{ web_version_url }}`, and in the default footer): a signed page that
shows the email as its reader got it (merge tags filled, links working and counted); a forged, altered
or foreign token is 404; a test email's link shows the campaign with the fallbacks; limited per client."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.kit.ratelimit import RateLimiter
from app.mail.archive.web_version_service import web_page
from app.mail.sending.render import Filled
from app.mail.sending.tokens import MailTokens
from tests.conftest import ApiUser
from tests.mail.sending.conftest import Sender, SmtpSink, campaign_with_list
from tests.mail.sending.emails import stats_of

WEB_VERSION = re.compile(r"https?://[^\s\"<>]+/w/[A-Za-z0-9_.\-]+")
HTML = (
    '<html><body><p>Hi {{ first_name | "there" }}, {{ email }}</p>'
    '<a href="{{ web_version_url }}">Read it in your browser</a>'
    '<a href="https://example.com/a">Read</a></body></html>'
)


@pytest.fixture(autouse=True)
def relay(settings: Settings, smtp_sink: SmtpSink) -> SmtpSink:
    settings.smtp_url = smtp_sink.url
    return smtp_sink


def path_of(url: str) -> str:
    return urlsplit(url.replace("&amp;", "&")).path


def sent_to_ann(client: TestClient, user: ApiUser, sender: Sender, **campaign: str) -> int:
    campaign_id = campaign_with_list(client, user.headers, ["ann@example.com"], **campaign)
    client.post("/contacts", json={"email": "ann@example.com", "first_name": "Ann"}, headers=user.headers)
    assert client.post(f"/campaigns/{campaign_id}/send", headers=user.headers).status_code == 200
    assert sender.drain() == 1
    return campaign_id


def test_the_merge_tag_opens_the_email_as_its_reader_got_it(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink
) -> None:
    campaign_id = sent_to_ann(client, api_user, sender, html=HTML)
    [received] = smtp_sink.received
    # The author's link and the default footer's (the html has no unsubscribe tag of its own).
    links = WEB_VERSION.findall(received.part("html"))
    assert len(links) == 2 and links[0] == links[1]
    page = client.get(path_of(links[0]))
    assert page.status_code == 200, page.text
    assert page.headers["content-type"].startswith("text/html")
    assert "script-src" not in page.headers["content-security-policy"]
    assert page.headers["x-robots-tag"] == "noindex"
    assert "Hi Ann, ann@example.com" in page.text
    # Its links are the email's: a click from the page counts as the email's click.
    click = re.search(r'href="[^"]*(/t/c/[^"]+)"', page.text)
    assert click is not None
    assert client.get(click.group(1), follow_redirects=False).headers["location"] == "https://example.com/a"
    assert stats_of(client, api_user.headers, campaign_id)["unique_click_count"] == 1


def test_the_default_footer_links_the_web_version_in_both_parts(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink
) -> None:
    sent_to_ann(client, api_user, sender)
    [received] = smtp_sink.received
    html_link = WEB_VERSION.search(received.part("html"))
    text_link = WEB_VERSION.search(received.part("plain"))
    assert html_link is not None and text_link is not None
    assert html_link.group(0) == text_link.group(0)
    assert "View in browser" in received.part("html")
    assert client.get(path_of(text_link.group(0))).status_code == 200


def test_forged_altered_and_foreign_tokens_are_404(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink, settings: Settings
) -> None:
    campaign_id = sent_to_ann(client, api_user, sender)
    token = path_of(WEB_VERSION.findall(smtp_sink.received[0].part("html"))[0]).rsplit("/", 1)[1]
    own = MailTokens(settings.resolved_secret_key)
    forger = MailTokens("another-secret-key-that-is-long-enough-to-look-real")
    altered = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    bad = [
        altered,
        forger.web_version_token(1, campaign_id),
        own.unsubscribe_token(1),  # another kind of token
        own.web_version_token(10**6, campaign_id),  # no such email
        own.web_version_token(1, 10**6),  # no such campaign
        "x",
    ]
    for candidate in bad:
        answer = client.get(f"/w/{candidate}")
        assert answer.status_code == 404, candidate
        assert "not valid" in answer.text
    assert client.get(f"/w/{token}").status_code == 200


def test_a_test_emails_link_shows_the_campaign_with_the_fallbacks(
    client: TestClient, api_user: ApiUser, smtp_sink: SmtpSink
) -> None:
    campaign_id = campaign_with_list(client, api_user.headers, [], html=HTML)
    test = {"emails": ["me@example.com"]}
    answer = client.post(f"/campaigns/{campaign_id}/test", json=test, headers=api_user.headers)
    assert answer.status_code == 200, answer.text
    [received] = smtp_sink.received
    page = client.get(path_of(WEB_VERSION.findall(received.part("html"))[0]))
    assert page.status_code == 200
    assert "Hi there, " in page.text and "me@example.com" not in page.text


def test_the_page_is_limited_per_client(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink
) -> None:
    sent_to_ann(client, api_user, sender)
    client.app.state.public_page_limiter = RateLimiter("2/minute", "")  # type: ignore[attr-defined]
    path = path_of(WEB_VERSION.findall(smtp_sink.received[0].part("html"))[0])
    answers = [client.get(path) for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert "Retry-After" in answers[-1].headers


def _filled(html: str, subject: str = "Hi <you>") -> Filled:
    return Filled(subject=subject, html=html, text="", unsubscribe_url="", text_values=[])


def test_a_fragment_becomes_a_page_with_a_language_and_the_subject_as_its_title() -> None:
    page = web_page(_filled("<p>Hello</p>"))
    assert page.startswith('<!DOCTYPE html><html lang="en"><head>')
    assert "<title>Hi &lt;you&gt;</title>" in page
    assert page.endswith("<body><p>Hello</p></body></html>")


def test_a_whole_document_gets_only_what_it_lacks() -> None:
    assert web_page(_filled("<html><head><style>p{}</style></head><body>x</body></html>")) == (
        '<html lang="en"><head><title>Hi &lt;you&gt;</title><style>p{}</style></head><body>x</body></html>'
    )
    assert web_page(_filled("<HTML class='m'><body>x</body></HTML>")) == (
        "<HTML class='m' lang=\"en\"><head><title>Hi &lt;you&gt;</title></head><body>x</body></HTML>"
    )
    own = '<html lang="de"><head><title>Neu</title></head><body>x</body></html>'
    assert web_page(_filled(own)) == own
