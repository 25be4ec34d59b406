"""Hosted sign-up forms: GET and POST /f/{id}, the confirmation email (through a real SMTP server on
loopback) and GET /f/confirm/{token}, checked through the email API as an account owner sees it."""

from __future__ import annotations

import logging
import re
import socket
import time
from typing import Any
from urllib.parse import urlsplit

import dkim
import pytest
from fastapi.testclient import TestClient
from httpx import Response
from itsdangerous import TimestampSigner
from limits import parse
from sqlalchemy.orm import Session

from app.config import Settings
from app.kit.ratelimit import RateLimiter
from app.kit.time import utcnow
from app.mail.dkim_service import create_key
from app.mail.form_service import create_form
from app.mail.hosted_forms.hosted_form_service import FormLimits
from app.mail.sending.tokens import MailTokens, Signup
from app.models import ContactList, Form
from tests.conftest import ApiUser
from tests.factories import create_list
from tests.smtp_sink import Received, SmtpSink

LINK = re.compile(r"https?://[^\s\"'<>]+/f/confirm/([A-Za-z0-9_.\-]+)")


@pytest.fixture
def sink(settings: Settings, smtp_sink: SmtpSink) -> SmtpSink:
    """Confirmation emails go to the loopback SMTP server (the app reads its settings per request)."""
    settings.smtp_url = smtp_sink.url
    return smtp_sink


@pytest.fixture
def roomy(app: Any) -> None:
    """Rate limits out of the way, for tests that post many times."""
    app.state.form_limits = FormLimits(RateLimiter("10000/minute"), RateLimiter("10000/minute"))


def new_form(client: TestClient, db: Session, user: ApiUser, title: str = "Weekly news") -> tuple[int, int]:
    """A form subscribing to a new list; returns (form id, list id)."""
    list_id = create_list(client, user)["id"]
    form = create_form(db, user.account_id, title, [list_id])
    db.commit()
    return form.id, list_id


def confirm_path(received: Received) -> str:
    found = LINK.search(received.part("plain"))
    assert found, received.part("plain")
    assert found.group(0) in received.part("html")
    return urlsplit(found.group(0)).path


def members(client: TestClient, user: ApiUser, list_id: int) -> dict[str, dict[str, Any]]:
    response = client.get(f"/lists/{list_id}/contacts", headers=user.headers)
    assert response.status_code == 200, response.text
    return {c["email"]: c for c in response.json()["data"]}


def contact_by_email(client: TestClient, user: ApiUser, email: str) -> dict[str, Any] | None:
    response = client.get("/contacts", params={"email": email}, headers=user.headers)
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    return data[0] if data else None


def contacts_count(client: TestClient, user: ApiUser) -> int:
    return int(client.get("/me", headers=user.headers).json()["contacts_count"])


def is_page(response: Response) -> str:
    assert response.headers["content-type"].startswith("text/html"), response.headers
    return response.text


def sign_up(client: TestClient, sink: SmtpSink, form_id: int, email: str, **names: str) -> str:
    """Submit the form and return the path of the confirmation link that arrived."""
    before = len(sink.to(email))
    response = client.post(f"/f/{form_id}", data={"email": email, **names})
    assert response.status_code == 200, response.text
    assert "Check your inbox" in is_page(response)
    arrived = sink.to(email)
    assert len(arrived) == before + 1
    return confirm_path(arrived[-1])


# ---------------------------------------------------------------------------------------------- the flow


def test_sign_up_confirm_and_a_second_click(
    client: TestClient, db: Session, api_user: ApiUser, sink: SmtpSink
) -> None:
    form_id, list_id = new_form(client, db, api_user)

    shown = client.get(f"/f/{form_id}")
    assert shown.status_code == 200
    text = is_page(shown)
    assert '<html lang="en">' in text
    assert "<title>Weekly news</title>" in text
    for name in ("email", "first_name", "last_name"):
        assert f'<label for="{name}">' in text
        assert f'id="{name}" name="{name}"' in text
    assert re.search(r'<input id="email" name="email" type="email"[^>]*\brequired\b', text)
    assert '<button type="submit">' in text
    assert "<script" not in text
    assert "default-src 'none'" in shown.headers["content-security-policy"]

    response = client.post(
        f"/f/{form_id}", data={"email": "Reader@Example.com", "first_name": " Ann ", "last_name": "Archer"}
    )
    assert response.status_code == 200, response.text
    assert "Reader@Example.com" in is_page(response)
    assert len(sink.received) == 1
    mail = sink.received[0]
    assert mail.recipients == ["Reader@Example.com"]
    assert mail.sender == "noreply@localhost"  # the base URL's host is an IP address in tests
    message = mail.message
    assert message["Subject"] == "Confirm your subscription to Weekly news"
    assert (message["From"].addresses[0].display_name, message["From"].addresses[0].addr_spec) == (
        "Weekly news",
        "noreply@localhost",
    )
    assert api_user.email in message["Reply-To"]
    assert (message["To"].addresses[0].display_name, message["To"].addresses[0].addr_spec) == (
        "Ann Archer",
        "Reader@Example.com",
    )
    assert message["Auto-Submitted"] == "auto-generated"
    path = confirm_path(mail)
    assert LINK.search(mail.part("plain")).group(0).startswith("http://127.0.0.1:8000/f/confirm/")  # type: ignore[union-attr]
    assert members(client, api_user, list_id) == {}  # nothing is stored before the confirmation

    confirmed = client.get(path)
    assert confirmed.status_code == 200, confirmed.text
    assert "You are subscribed" in is_page(confirmed)
    assert confirmed.headers["referrer-policy"] == "no-referrer"
    joined = members(client, api_user, list_id)
    assert set(joined) == {"Reader@Example.com"}
    contact = joined["Reader@Example.com"]
    assert (contact["first_name"], contact["last_name"]) == ("Ann", "Archer")
    assert contact["unsubscribed_at"] is None
    count = contacts_count(client, api_user)
    assert count == 1

    again = client.get(path)
    assert again.status_code == 200
    assert is_page(again) == confirmed.text
    assert contact_by_email(client, api_user, "reader@example.com") == contact  # not even updated_at moved
    assert contacts_count(client, api_user) == count
    assert len(sink.received) == 1


def test_a_json_body_is_accepted(client: TestClient, db: Session, api_user: ApiUser, sink: SmtpSink) -> None:
    form_id, list_id = new_form(client, db, api_user)
    response = client.post(f"/f/{form_id}", json={"email": "json@example.com", "first_name": "Jo"})
    assert response.status_code == 200, response.text
    assert client.get(confirm_path(sink.to("json@example.com")[0])).status_code == 200
    assert members(client, api_user, list_id)["json@example.com"]["first_name"] == "Jo"


def test_an_existing_contact_keeps_its_lists_and_takes_the_given_names(
    client: TestClient, db: Session, api_user: ApiUser, sink: SmtpSink
) -> None:
    other = create_list(client, api_user, "Other")["id"]
    made = client.post(
        "/contacts",
        json={"email": "old@example.com", "first_name": "Old", "last_name": "Kept", "lists": [other]},
        headers=api_user.headers,
    ).json()
    form_id, list_id = new_form(client, db, api_user)
    assert client.get(sign_up(client, sink, form_id, "OLD@example.com", first_name="New")).status_code == 200
    contact = contact_by_email(client, api_user, "old@example.com")
    assert contact is not None
    assert contact["id"] == made["id"]
    assert (contact["first_name"], contact["last_name"]) == ("New", "Kept")
    assert "old@example.com" in members(client, api_user, other)
    assert "old@example.com" in members(client, api_user, list_id)
    assert contacts_count(client, api_user) == 1


def test_page_and_email_escape_what_comes_from_the_database(
    client: TestClient, db: Session, api_user: ApiUser, sink: SmtpSink
) -> None:
    form_id, _ = new_form(client, db, api_user, title='<b>News</b> & "more"')
    text = is_page(client.get(f"/f/{form_id}"))
    assert "<b>News</b>" not in text
    assert "&lt;b&gt;News&lt;/b&gt; &amp; &quot;more&quot;" in text
    client.post(f"/f/{form_id}", data={"email": "esc@example.com", "first_name": "<i>Ann</i>"})
    mail = sink.to("esc@example.com")[0]
    assert "<b>News</b>" not in mail.part("html")
    assert mail.message["Subject"] == 'Confirm your subscription to <b>News</b> & "more"'
    done = client.get(confirm_path(mail))
    assert done.status_code == 200
    assert "<b>News</b>" not in done.text


def test_a_form_of_a_free_plan_account_works(
    client: TestClient, db: Session, make_user: Any, sink: SmtpSink
) -> None:
    owner = make_user(plan="free")
    free_list = ContactList(account_id=owner.account_id, user_id=owner.user_id, name="Free list")
    db.add(free_list)
    db.flush()
    form = create_form(db, owner.account_id, "Free form", [free_list.id])
    db.commit()
    assert client.get(sign_up(client, sink, form.id, "free@example.com")).status_code == 200


# ---------------------------------------------------------------------------------------------- 404s


@pytest.mark.parametrize("raw_id", ["999999", "abc", "0", "-1", "1.5", "99999999999", "2147483648", "%00"])
def test_unknown_or_malformed_form_ids_are_404_pages(client: TestClient, raw_id: str) -> None:
    for response in (
        client.get(f"/f/{raw_id}"),
        client.post(f"/f/{raw_id}", data={"email": "a@example.com"}),
    ):
        assert response.status_code == 404, (raw_id, response.text)
        assert "Form not found" in is_page(response)


def test_a_deleted_form_or_one_without_live_lists_is_404(
    client: TestClient, db: Session, api_user: ApiUser, sink: SmtpSink
) -> None:
    form_id, list_id = new_form(client, db, api_user)
    path = sign_up(client, sink, form_id, "late@example.com")
    db.get_one(Form, form_id).deleted_at = utcnow()
    db.commit()
    assert client.get(f"/f/{form_id}").status_code == 404
    assert client.post(f"/f/{form_id}", data={"email": "a@example.com"}).status_code == 404
    gone = client.get(path)  # the link of a form deleted since it was sent
    assert gone.status_code == 404
    assert "Form not found" in is_page(gone)
    assert contact_by_email(client, api_user, "late@example.com") is None

    form_id, list_id = new_form(client, db, api_user)
    db.get_one(ContactList, list_id).deleted_at = utcnow()
    db.commit()
    assert client.get(f"/f/{form_id}").status_code == 404
    assert len(sink.received) == 1


def test_forged_tampered_foreign_and_expired_links_are_404(
    client: TestClient,
    db: Session,
    api_user: ApiUser,
    sink: SmtpSink,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    form_id, _ = new_form(client, db, api_user)
    good = sign_up(client, sink, form_id, "real@example.com").rsplit("/", 1)[1]
    ours = MailTokens(settings.resolved_secret_key)
    theirs = MailTokens("another-secret-key-that-is-long-enough-too")
    signup = Signup(form_id, "forged@example.com", None, None)
    bad_tokens = [
        "nonsense",
        good[:-2] + ("AA" if not good.endswith("AA") else "BB"),
        good + "x",
        theirs.confirm_token(signup),
        ours.unsubscribe_token(1),
        ours.click_token(1, "https://example.com"),
        "a" * 5000,
        "%00",
        "%FF%FE",
    ]
    monkeypatch.setattr(TimestampSigner, "get_timestamp", lambda self: int(time.time()) - 8 * 86400)
    bad_tokens.append(ours.confirm_token(signup))  # signed eight days ago: expired
    monkeypatch.undo()
    for token in bad_tokens:
        response = client.get(f"/f/confirm/{token}")
        assert response.status_code == 404, (token, response.text)
        assert "invalid or has expired" in is_page(response)
    assert contact_by_email(client, api_user, "forged@example.com") is None
    assert contacts_count(client, api_user) == 0
    assert client.get(f"/f/confirm/{good}").status_code == 200


# ---------------------------------------------------------------------------------------------- bad input


def test_invalid_fields_show_the_form_again_with_messages(
    client: TestClient, db: Session, api_user: ApiUser, sink: SmtpSink
) -> None:
    form_id, _ = new_form(client, db, api_user)
    response = client.post(
        f"/f/{form_id}",
        data={"email": "not-an-email", "first_name": '"><script>x</script>', "last_name": "L"},
    )
    assert response.status_code == 422
    text = is_page(response)
    assert "<title>Error: Weekly news</title>" in text
    assert 'role="alert"' in text
    assert "The email field must be a valid email address." in text
    assert 'aria-invalid="true" aria-describedby="email-error"' in text
    assert 'value="not-an-email"' in text
    assert "<script>" not in text
    assert "&quot;&gt;&lt;script&gt;x&lt;/script&gt;" in text
    assert 'value="L"' in text

    for data, message in [
        ({"email": ""}, "The email field is required."),
        ({}, "The email field is required."),
        ({"email": "a@example.test"}, "The email field must be a valid email address."),
        (
            {"email": "a@example.com", "first_name": "x" * 192},
            "The first name field must not be greater than 191 characters.",
        ),
        (
            {"email": "a@example.com", "last_name": "x" * 192},
            "The last name field must not be greater than 191 characters.",
        ),
        ({"email": "a@example.com", "first_name": "a\x00b"}, "must not contain NUL characters"),
    ]:
        response = client.post(f"/f/{form_id}", data=data)
        assert response.status_code == 422, (data, response.text)
        assert message in is_page(response), data
    assert (
        client.post(f"/f/{form_id}", data={"email": "a@example.com", "first_name": "x" * 191}).status_code
        == 200
    )
    assert len(sink.received) == 1


def deep(levels: int) -> str:
    return '{"email": ' + "[" * levels + "]" * levels + "}"


GARBAGE: list[tuple[str, bytes, str | None]] = [
    ("empty form", b"", "application/x-www-form-urlencoded"),
    ("empty json", b"", "application/json"),
    ("no content type", b"email=a%40example.com", None),
    ("text/plain", b"email=a@example.com", "text/plain"),
    ("xml", b"<email>a@example.com</email>", "application/xml"),
    (
        "multipart",
        b"--x\r\nContent-Disposition: form-data; name=email\r\n\r\na@example.com\r\n--x--",
        "multipart/form-data; boundary=x",
    ),
    ("bad percent utf-8", b"email=a%FF%FE%40example.com", "application/x-www-form-urlencoded"),
    ("raw invalid utf-8", b"email=\xff\xfe@example.com", "application/x-www-form-urlencoded"),
    ("raw invalid utf-8 json", b'{"email": "\xff@example.com"}', "application/json"),
    ("nul in email", b"email=a%00b%40example.com", "application/x-www-form-urlencoded"),
    ("nul only", b"email=%00", "application/x-www-form-urlencoded"),
    ("nul in name", b"email=a%40example.com&last_name=%00", "application/x-www-form-urlencoded"),
    ("huge email", b"email=" + b"a" * 30000 + b"%40example.com", "application/x-www-form-urlencoded"),
    ("huge body", b"email=a%40example.com&first_name=" + b"x" * 200_000, "application/x-www-form-urlencoded"),
    ("many fields", b"&".join(b"f%d=1" % i for i in range(500)), "application/x-www-form-urlencoded"),
    ("json array", b'["a@example.com"]', "application/json"),
    ("json string", b'"a@example.com"', "application/json"),
    ("json invalid", b'{"email": ', "application/json"),
    ("json number email", b'{"email": 12}', "application/json"),
    ("json list email", b'{"email": ["a@example.com"]}', "application/json"),
    ("json object email", b'{"email": {"a": 1}}', "application/json"),
    ("json bool name", b'{"email": "a@example.com", "first_name": true}', "application/json"),
    ("json surrogate", b'{"email": "a@example.com", "first_name": "a\\ud800b"}', "application/json"),
    ("json surrogate email", b'{"email": "\\ud800@example.com"}', "application/json"),
    ("json deep", deep(100).encode(), "application/json"),
    ("json very deep", deep(100_000).encode()[:30_000], "application/json"),
    ("sql", b"email=a%40example.com%27%3B+DROP+TABLE+contacts%3B--", "application/x-www-form-urlencoded"),
    (
        "header injection",
        b"email=a%40example.com%0D%0ABcc%3A+b%40example.com",
        "application/x-www-form-urlencoded",
    ),
]


@pytest.mark.parametrize(("name", "body", "content_type"), GARBAGE, ids=[g[0] for g in GARBAGE])
def test_garbage_is_a_4xx_page_and_sends_nothing(
    client: TestClient,
    db: Session,
    api_user: ApiUser,
    sink: SmtpSink,
    roomy: None,
    name: str,
    body: bytes,
    content_type: str | None,
) -> None:
    form_id, _ = new_form(client, db, api_user)
    headers = {"content-type": content_type} if content_type else {}
    response = client.post(f"/f/{form_id}", content=body, headers=headers)
    assert 400 <= response.status_code < 500, (name, response.status_code, response.text[:500])
    text = is_page(response)
    assert "<form" in text
    assert sink.received == []
    assert contacts_count(client, api_user) == 0


def test_a_huge_body_is_413_and_other_types_415(
    client: TestClient, db: Session, api_user: ApiUser, roomy: None
) -> None:
    form_id, _ = new_form(client, db, api_user)
    huge = client.post(f"/f/{form_id}", data={"email": "a@example.com", "first_name": "x" * 100_000})
    assert huge.status_code == 413
    assert "too large" in huge.text
    # Without a Content-Length (chunked), the body is cut off at the limit as it streams in.
    chunks = iter([b"email=a%40example.com&first_name="] + [b"x" * 4096] * 64)
    streamed = client.post(
        f"/f/{form_id}", content=chunks, headers={"content-type": "application/x-www-form-urlencoded"}
    )
    assert streamed.status_code == 413
    plain = client.post(f"/f/{form_id}", content=b"a@example.com", headers={"content-type": "text/plain"})
    assert plain.status_code == 415


# ---------------------------------------------------------------------------------------------- abuse


def test_the_honeypot_answers_as_usual_and_sends_nothing(
    client: TestClient, db: Session, api_user: ApiUser, sink: SmtpSink
) -> None:
    form_id, _ = new_form(client, db, api_user)
    assert 'name="website" type="text" tabindex="-1"' in client.get(f"/f/{form_id}").text
    response = client.post(f"/f/{form_id}", data={"email": "bot@example.com", "website": "http://spam"})
    assert response.status_code == 200
    assert "Check your inbox" in response.text
    assert sink.received == []


def test_the_default_limits(app: Any) -> None:
    limits: FormLimits = app.state.form_limits
    assert limits.per_client.item == parse("10/minute")
    assert limits.per_email.item == parse("5/hour")


def test_ten_posts_from_one_address_then_429(
    client: TestClient, db: Session, api_user: ApiUser, sink: SmtpSink, app: Any
) -> None:
    # The same count over a day: a sliding window of a minute could straddle its boundary mid-test.
    app.state.form_limits = FormLimits(RateLimiter("10/day"), RateLimiter("10000/minute"))
    form_id, _ = new_form(client, db, api_user)
    for i in range(10):
        response = client.post(f"/f/{form_id}", data={"email": f"r{i}@example.com"})
        assert response.status_code == 200, (i, response.text)
    refused = client.post(f"/f/{form_id}", data={"email": "r10@example.com"})
    assert refused.status_code == 429
    assert 1 <= int(refused.headers["retry-after"]) <= 2 * 86400
    text = is_page(refused)
    assert "Too many sign-ups" in text
    assert 'value="r10@example.com"' in text  # the form, filled in, to try again later
    assert len(sink.received) == 10
    # Another form of the same service shares the limit: it is per client, not per form.
    other_id, _ = new_form(client, db, api_user, title="Other")
    assert client.post(f"/f/{other_id}", data={"email": "x@example.com"}).status_code == 429


def test_five_confirmation_emails_to_one_address_then_429(
    client: TestClient, db: Session, api_user: ApiUser, sink: SmtpSink, app: Any
) -> None:
    app.state.form_limits = FormLimits(RateLimiter("10000/minute"), RateLimiter("5/day"))
    form_id, _ = new_form(client, db, api_user)
    for i in range(5):
        address = "victim@example.com" if i % 2 else "VICTIM@example.com"
        assert client.post(f"/f/{form_id}", data={"email": address}).status_code == 200
    refused = client.post(f"/f/{form_id}", data={"email": "Victim@Example.com"})
    assert refused.status_code == 429
    assert int(refused.headers["retry-after"]) >= 1
    assert "already sent several confirmation emails" in refused.text
    assert len(sink.received) == 5
    assert client.post(f"/f/{form_id}", data={"email": "someone.else@example.com"}).status_code == 200


# ---------------------------------------------------------------------------------------------- delivery


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_failing_relay_is_a_503_page_with_the_form_filled_in_and_a_log_line(
    client: TestClient,
    db: Session,
    api_user: ApiUser,
    settings: Settings,
    smtp_sink: SmtpSink,
    caplog: pytest.LogCaptureFixture,
) -> None:
    form_id, list_id = new_form(client, db, api_user)
    settings.smtp_url = f"smtp://127.0.0.1:{closed_port()}"
    with caplog.at_level(logging.WARNING, logger="tidings.forms"):
        response = client.post(f"/f/{form_id}", data={"email": "wait@example.com", "first_name": "Wes"})
    assert response.status_code == 503
    assert response.headers["retry-after"] == "60"
    text = is_page(response)
    assert "could not send the confirmation email" in text
    assert 'value="wait@example.com"' in text
    assert 'value="Wes"' in text
    assert any(
        r.name == "tidings.forms" and "not sent" in r.getMessage() and str(form_id) in r.getMessage()
        for r in caplog.records
    )
    settings.smtp_url = "smtp://[nonsense"
    with caplog.at_level(logging.WARNING, logger="tidings.forms"):
        assert client.post(f"/f/{form_id}", data={"email": "wait@example.com"}).status_code == 503
    # The visitor resubmits once the relay is back.
    settings.smtp_url = smtp_sink.url
    path = sign_up(client, smtp_sink, form_id, "wait@example.com", first_name="Wes")
    assert client.get(path).status_code == 200
    assert "wait@example.com" in members(client, api_user, list_id)


def test_a_recipient_the_relay_refuses_is_a_422_on_the_email_field(
    client: TestClient, db: Session, api_user: ApiUser, sink: SmtpSink
) -> None:
    form_id, _ = new_form(client, db, api_user)
    sink.refuse["nobody@example.com"] = "550 5.1.1 No such user"
    response = client.post(f"/f/{form_id}", data={"email": "nobody@example.com"})
    assert response.status_code == 422
    assert "Email to this address is refused" in response.text
    sink.refuse["later@example.com"] = "451 4.3.0 Try again later"
    assert client.post(f"/f/{form_id}", data={"email": "later@example.com"}).status_code == 503


def test_without_an_smtp_url_the_email_goes_to_the_outbox(
    client: TestClient, db: Session, api_user: ApiUser, settings: Settings
) -> None:
    form_id, list_id = new_form(client, db, api_user)
    assert client.post(f"/f/{form_id}", data={"email": "box@example.com"}).status_code == 200
    files = list((settings.outbox_path / "new").iterdir())
    assert len(files) == 1
    stored = Received("", [], files[0].read_bytes())
    assert stored.message["To"].addresses[0].addr_spec == "box@example.com"
    assert client.get(confirm_path(stored)).status_code == 200
    assert "box@example.com" in members(client, api_user, list_id)


def test_the_sender_and_the_link_follow_the_base_url(
    client: TestClient, db: Session, api_user: ApiUser, sink: SmtpSink, settings: Settings
) -> None:
    settings.base_url = "https://News.Example.org/"
    form_id, list_id = new_form(client, db, api_user)
    client.post(f"/f/{form_id}", data={"email": "site@example.com"})
    mail = sink.to("site@example.com")[0]
    assert mail.sender == "noreply@news.example.org"
    found = LINK.search(mail.part("plain"))
    assert found
    assert found.group(0).startswith("https://News.Example.org/f/confirm/")
    assert client.get(urlsplit(found.group(0)).path).status_code == 200
    assert "site@example.com" in members(client, api_user, list_id)


# ---------------------------------------------------------------------------------------------- contacts


def test_an_unsubscribed_contact_that_confirms_is_subscribed_again(
    client: TestClient, db: Session, api_user: ApiUser, sink: SmtpSink
) -> None:
    client.post("/contacts", json={"email": "back@example.com"}, headers=api_user.headers)
    gone = client.patch("/unsubscribe", json={"email": "back@example.com"}, headers=api_user.headers)
    assert gone.json()["unsubscribed_at"] is not None
    form_id, list_id = new_form(client, db, api_user)
    assert client.get(sign_up(client, sink, form_id, "back@example.com")).status_code == 200
    contact = members(client, api_user, list_id)["back@example.com"]
    assert contact["unsubscribed_at"] is None
    assert contact["id"] == gone.json()["id"]


def test_an_old_link_does_not_undo_a_later_unsubscribe(
    client: TestClient, db: Session, api_user: ApiUser, sink: SmtpSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    form_id, _ = new_form(client, db, api_user)
    # The link was sent an hour ago.
    monkeypatch.setattr(TimestampSigner, "get_timestamp", lambda self: int(time.time()) - 3600)
    path = sign_up(client, sink, form_id, "firm@example.com")
    monkeypatch.undo()
    assert client.get(path).status_code == 200
    client.patch("/unsubscribe", json={"email": "firm@example.com"}, headers=api_user.headers)
    replay = client.get(path)
    assert replay.status_code == 410
    text = is_page(replay)
    assert "no longer works" in text
    assert f'href="http://127.0.0.1:8000/f/{form_id}"' in text
    contact = contact_by_email(client, api_user, "firm@example.com")
    assert contact is not None
    assert contact["unsubscribed_at"] is not None
    # A new sign-up, sent after the unsubscribe, does subscribe again.
    assert client.get(sign_up(client, sink, form_id, "firm@example.com")).status_code == 200
    contact = contact_by_email(client, api_user, "firm@example.com")
    assert contact is not None
    assert contact["unsubscribed_at"] is None


def test_a_soft_deleted_contact_comes_back_with_only_the_forms_lists(
    client: TestClient, db: Session, api_user: ApiUser, sink: SmtpSink
) -> None:
    other = create_list(client, api_user, "Other")["id"]
    made = client.post(
        "/contacts", json={"email": "again@example.com", "lists": [other]}, headers=api_user.headers
    ).json()
    assert client.delete(f"/contacts/{made['id']}", headers=api_user.headers).status_code == 200
    assert contacts_count(client, api_user) == 0
    form_id, list_id = new_form(client, db, api_user)
    assert client.get(sign_up(client, sink, form_id, "again@example.com")).status_code == 200
    assert members(client, api_user, list_id)["again@example.com"]["id"] == made["id"]
    assert members(client, api_user, other) == {}
    assert contacts_count(client, api_user) == 1


def test_a_link_is_spent_when_the_owner_deleted_the_contact_after_it_was_sent(
    client: TestClient, db: Session, api_user: ApiUser, sink: SmtpSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    form_id, _ = new_form(client, db, api_user)
    monkeypatch.setattr(TimestampSigner, "get_timestamp", lambda self: int(time.time()) - 3600)
    path = sign_up(client, sink, form_id, "removed@example.com")
    monkeypatch.undo()
    assert client.get(path).status_code == 200
    contact = contact_by_email(client, api_user, "removed@example.com")
    assert contact is not None
    client.delete(f"/contacts/{contact['id']}", headers=api_user.headers)
    assert client.get(path).status_code == 410
    assert contact_by_email(client, api_user, "removed@example.com") is None


def test_the_contact_limit_is_a_friendly_page(
    client: TestClient, db: Session, make_user: Any, sink: SmtpSink
) -> None:
    owner = make_user(contact_limit=1)
    form_id, list_id = new_form(client, db, owner)
    assert client.get(sign_up(client, sink, form_id, "first@example.com")).status_code == 200
    refused = client.get(sign_up(client, sink, form_id, "second@example.com"))
    assert refused.status_code == 402
    assert "cannot take new subscribers" in is_page(refused)
    assert set(members(client, owner, list_id)) == {"first@example.com"}
    # An existing contact still confirms: it is no new contact.
    assert client.get(sign_up(client, sink, form_id, "first@example.com", first_name="F")).status_code == 200
    assert members(client, owner, list_id)["first@example.com"]["first_name"] == "F"


def test_hosted_form_routes_stay_out_of_the_api_document(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert not [path for path in paths if path.startswith("/f/")]


def test_the_confirmation_is_signed_with_the_sender_domains_dkim_key(
    client: TestClient, db: Session, api_user: ApiUser, sink: SmtpSink, settings: Settings
) -> None:
    settings.base_url = "https://news.example.org/"
    form_id, _ = new_form(client, db, api_user)
    client.post(f"/f/{form_id}", data={"email": "before@example.com"})
    assert b"DKIM-Signature" not in sink.to("before@example.com")[0].data  # no key yet
    record = create_key(
        db, settings.resolved_secret_key, "news.example.org", selector="forms", algorithm="rsa", now=utcnow()
    )
    db.commit()
    client.post(f"/f/{form_id}", data={"email": "after@example.com"})
    signed = sink.to("after@example.com")[0].data
    published = {f"{record.dns_name}.".encode(): record.txt_value.encode()}
    assert signed.startswith(b"DKIM-Signature: ")
    assert dkim.verify(signed, dnsfunc=lambda name, timeout=5: published.get(name))
