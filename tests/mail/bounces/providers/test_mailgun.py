"""Mailgun's HMAC-SHA256 signature of timestamp + token, and its events as reports."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta

import pytest

from app.kit.errors import ValidationFailed
from app.mail.bounces.providers import mailgun
from tests.mail.bounces.providers.samples import mailgun_body, mailgun_complained, mailgun_failed

KEY = "key-0123456789abcdef0123456789abcdef"
NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def test_the_signature_is_the_hex_hmac_sha256_of_timestamp_and_token() -> None:
    # Worked by hand with the standard library, independently of mailgun.sign.
    expected = hmac.new(b"secret", b"1529006854" + b"abc", hashlib.sha256).hexdigest()
    assert mailgun.sign("secret", "1529006854", "abc") == expected
    signed = (datetime.fromtimestamp(1529006854, UTC), "abc")
    assert (
        mailgun.verify("secret", {"timestamp": "1529006854", "token": "abc", "signature": expected}) == signed
    )
    upper = {"timestamp": 1529006854, "token": "abc", "signature": expected.upper()}
    assert mailgun.verify("secret", upper) == signed


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
    [report] = mailgun.read(json.dumps(mailgun_body(KEY, event, signed_at=NOW)).encode(), KEY, NOW).reports
    assert (report.type, report.bounce_type, report.message_id) == expected
    assert report.email == "ann@example.com"


def test_other_events_are_skipped() -> None:
    read = mailgun.read(
        json.dumps(
            mailgun_body(KEY, {"event": "delivered", "recipient": "a@example.com"}, signed_at=NOW)
        ).encode(),
        KEY,
        NOW,
    )
    assert (read.reports, read.skipped) == ([], 1)


@pytest.mark.parametrize(
    "event_data", [None, [], {}, {"event": "failed"}, {"event": "failed", "recipient": ""}]
)
def test_signed_garbage_is_invalid(event_data: object) -> None:
    body = json.dumps(mailgun_body(KEY, {}, signed_at=NOW) | {"event-data": event_data}).encode()
    with pytest.raises(ValidationFailed):
        mailgun.read(body, KEY, NOW)


def test_an_unsigned_body_is_refused_before_its_events_are_read() -> None:
    body = mailgun_body(KEY, mailgun_failed("ann@example.com", None), signed_at=NOW)
    del body["signature"]
    with pytest.raises(mailgun.BadSignature):
        mailgun.read(json.dumps(body).encode(), KEY, NOW)
    with pytest.raises(mailgun.BadSignature):
        mailgun.read(b"[1, 2]", KEY, NOW)


@pytest.mark.parametrize("off", [timedelta(minutes=-5, seconds=-1), timedelta(minutes=5, seconds=1)])
def test_a_signature_more_than_five_minutes_off_is_refused(off: timedelta) -> None:
    body = json.dumps(mailgun_body(KEY, mailgun_failed("ann@example.com", None), signed_at=NOW)).encode()
    [report] = mailgun.read(body, KEY, NOW + off / 2).reports
    assert report.email == "ann@example.com"
    with pytest.raises(mailgun.BadSignature):
        mailgun.read(body, KEY, NOW + off)


def test_the_token_comes_out_to_be_remembered_with_its_body() -> None:
    body = json.dumps(mailgun_body(KEY, mailgun_failed("ann@example.com", None), "tok", NOW)).encode()
    assert mailgun.read(body, KEY, NOW).single_use == mailgun.SingleUse("mailgun", "tok", body, NOW)
