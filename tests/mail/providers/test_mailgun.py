"""Mailgun's HMAC-SHA256 signature of timestamp + token, and its events as reports."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from app.kit.errors import ValidationFailed
from app.mail.providers import mailgun
from tests.mail.providers.samples import mailgun_body, mailgun_complained, mailgun_failed

KEY = "key-0123456789abcdef0123456789abcdef"


def test_the_signature_is_the_hex_hmac_sha256_of_timestamp_and_token() -> None:
    # Worked by hand with the standard library, independently of mailgun.sign.
    expected = hmac.new(b"secret", b"1529006854" + b"abc", hashlib.sha256).hexdigest()
    assert mailgun.sign("secret", "1529006854", "abc") == expected
    mailgun.verify("secret", {"timestamp": "1529006854", "token": "abc", "signature": expected})
    mailgun.verify("secret", {"timestamp": 1529006854, "token": "abc", "signature": expected.upper()})


@pytest.mark.parametrize(
    "signature",
    [
        None,
        "x",
        {},
        {"timestamp": "1529006854", "token": "abc"},
        {"timestamp": "1529006855", "token": "abc", "signature": "SIGNED"},
        {"timestamp": "1529006854", "token": "abd", "signature": "SIGNED"},
        {"timestamp": "1529006854", "token": "abc", "signature": ""},
        {"timestamp": "1529006854", "token": "abc", "signature": 5},
        {"timestamp": True, "token": "abc", "signature": "SIGNED"},
    ],
)
def test_wrong_signatures_fail(signature: object) -> None:
    good = mailgun.sign("secret", "1529006854", "abc")
    if isinstance(signature, dict) and signature.get("signature") == "SIGNED":
        signature = {**signature, "signature": good}
    with pytest.raises(mailgun.BadSignature):
        mailgun.verify("secret", signature)
    with pytest.raises(mailgun.BadSignature):
        mailgun.verify("other", {"timestamp": "1529006854", "token": "abc", "signature": good})


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (mailgun_failed("ann@example.com", "2013.1@h"), ("bounce", "hard", "2013.1@h")),
        (mailgun_failed("ann@example.com", None, "temporary"), ("bounce", "soft", None)),
        (mailgun_complained("ann@example.com", "x@h"), ("complaint", "hard", "x@h")),
        ({"event": "unsubscribed", "recipient": "ann@example.com"}, ("unsubscribe", "hard", None)),
    ],
)
def test_events_map_onto_reports(event: dict[str, object], expected: tuple[str, str, str | None]) -> None:
    [report] = mailgun.read(json.dumps(mailgun_body(KEY, event)).encode(), KEY).reports
    assert (report.type, report.bounce_type, report.message_id) == expected
    assert report.email == "ann@example.com"


def test_other_events_are_skipped() -> None:
    read = mailgun.read(
        json.dumps(mailgun_body(KEY, {"event": "delivered", "recipient": "a@example.com"})).encode(), KEY
    )
    assert (read.reports, read.skipped) == ([], 1)


@pytest.mark.parametrize(
    "event_data", [None, [], {}, {"event": "failed"}, {"event": "failed", "recipient": ""}]
)
def test_signed_garbage_is_invalid(event_data: object) -> None:
    body = json.dumps(mailgun_body(KEY, {}) | {"event-data": event_data}).encode()
    with pytest.raises(ValidationFailed):
        mailgun.read(body, KEY)


def test_an_unsigned_body_is_refused_before_its_events_are_read() -> None:
    body = mailgun_body(KEY, mailgun_failed("ann@example.com", None))
    del body["signature"]
    with pytest.raises(mailgun.BadSignature):
        mailgun.read(json.dumps(body).encode(), KEY)
    with pytest.raises(mailgun.BadSignature):
        mailgun.read(b"[1, 2]", KEY)
