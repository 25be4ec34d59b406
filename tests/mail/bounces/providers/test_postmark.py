"""Postmark's credentials (basic auth password or token) and its records as reports."""

from __future__ import annotations

import base64
import json

import pytest

from app.kit.errors import ValidationFailed
from app.mail.bounces.providers import postmark
from tests.mail.bounces.providers.samples import postmark_bounce, postmark_spam_complaint

SECRET = "pm-secret-0123456789"


def basic(credentials: str) -> str:
    return "Basic " + base64.b64encode(credentials.encode()).decode()


def test_the_secret_as_basic_auth_password_or_token() -> None:
    assert postmark.authenticated(SECRET, basic(f"tidings:{SECRET}"), None)
    assert postmark.authenticated(SECRET, basic(f":{SECRET}"), None)
    assert postmark.authenticated(SECRET, "", SECRET)


@pytest.mark.parametrize(
    ("authorization", "token"),
    [
        ("", None),
        (basic(f"{SECRET}:"), None),
        (basic(SECRET), None),
        (basic(f"tidings:{SECRET}x"), None),
        (f"Bearer {SECRET}", None),
        ("Basic %%%", None),
        ("Basic " + base64.b64encode(b"u:\xff").decode(), None),
        ("", ""),
        ("", SECRET[:-1]),
        # A wrong token is not rescued by right basic credentials.
        (basic(f"tidings:{SECRET}"), "wrong"),
    ],
)
def test_wrong_credentials(authorization: str, token: str | None) -> None:
    assert not postmark.authenticated(SECRET, authorization, token)


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        (postmark_bounce("ann@example.com"), ("bounce", "hard")),
        (postmark_bounce("ann@example.com", "BadEmailAddress", 100000), ("bounce", "hard")),
        (postmark_bounce("ann@example.com", "SoftBounce", 4096), ("bounce", "soft")),
        (postmark_bounce("ann@example.com", "Transient", 2), ("bounce", "soft")),
        (postmark_bounce("ann@example.com", "SpamComplaint", 512), ("complaint", "hard")),
        (postmark_bounce("ann@example.com", "Unsubscribe", 16), ("unsubscribe", "hard")),
        (postmark_spam_complaint("ann@example.com"), ("complaint", "hard")),
        (
            {
                "RecordType": "SubscriptionChange",
                "MessageID": "883953f4-6105-42a2-a16a-77a8eac79483",
                "ServerID": 123456,
                "MessageStream": "outbound",
                "ChangedAt": "2026-11-25T16:33:54.9070259Z",
                "Recipient": "ann@example.com",
                "Origin": "Recipient",
                "SuppressSending": True,
                "SuppressionReason": "ManualSuppression",
                "Tag": "my-tag",
                "Metadata": {"example": "value"},
            },
            ("unsubscribe", "hard"),
        ),
    ],
)
def test_records_map_onto_reports(record: dict[str, object], expected: tuple[str, str]) -> None:
    [report] = postmark.read(json.dumps(record).encode()).reports
    assert (report.type, report.bounce_type, report.email) == (*expected, "ann@example.com")
    # Postmark's own MessageID is not the email's Message-ID header.
    assert report.message_id is None


def test_a_message_id_header_in_the_record_is_used() -> None:
    record = postmark_bounce("ann@example.com") | {"Headers": [{"Name": "Message-ID", "Value": "<1.2.ab@h>"}]}
    [report] = postmark.read(json.dumps(record).encode()).reports
    assert report.message_id == "<1.2.ab@h>"


@pytest.mark.parametrize(
    "record",
    [
        {"RecordType": "Delivery", "Recipient": "ann@example.com"},
        {"RecordType": "Open", "Recipient": "ann@example.com"},
        postmark_bounce("ann@example.com", "AutoResponder", 64),
        {"RecordType": "SubscriptionChange", "Recipient": "ann@example.com", "SuppressSending": False},
    ],
)
def test_other_records_are_skipped(record: dict[str, object]) -> None:
    assert postmark.read(json.dumps(record).encode()).skipped == 1


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"nope",
        b"[]",
        b"{}",
        b'{"RecordType": "Bounce"}',
        b'{"RecordType": "Bounce", "Type": "HardBounce"}',
        b'{"RecordType": "Bounce", "Type": "HardBounce", "Email": ""}',
    ],
)
def test_garbage_is_invalid(body: bytes) -> None:
    with pytest.raises(ValidationFailed):
        postmark.read(body)
