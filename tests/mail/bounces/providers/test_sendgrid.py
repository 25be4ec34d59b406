"""SendGrid's ECDSA signature over timestamp + body, with a key made here, and its events as reports."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from cryptography.hazmat.primitives import serialization

from app.kit.errors import DomainError, ValidationFailed
from app.mail.bounces.providers import sendgrid
from tests.mail.bounces.providers.samples import SendGridSigner, sendgrid_event

SIGNED_AT = "1764072000"
NOW = datetime.fromtimestamp(int(SIGNED_AT), UTC)
BODY = json.dumps([sendgrid_event("bounce", "ann@example.com", "<1.2.ab@h>", type="bounce")]).encode()


@pytest.fixture(scope="module")
def signer() -> SendGridSigner:
    return SendGridSigner.make()


def test_a_signed_body_verifies_with_the_base64_or_pem_key(signer: SendGridSigner) -> None:
    headers = signer.headers(BODY, SIGNED_AT)
    signature, timestamp = headers[sendgrid.SIGNATURE_HEADER], headers[sendgrid.TIMESTAMP_HEADER]
    sendgrid.verify(signer.public_key, signature, timestamp, BODY, NOW)
    pem = signer.key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    sendgrid.verify(pem.decode(), signature, timestamp, BODY, NOW)


@pytest.mark.parametrize(
    ("signature", "timestamp", "body"),
    [
        (None, "1764072000", BODY),
        ("", "1764072000", BODY),
        ("SIGNED", None, BODY),
        ("SIGNED", "1764072001", BODY),
        ("SIGNED", "1764072000", BODY + b" "),
        ("SIGNED", "1764072000", BODY.replace(b"ann@", b"bob@")),
        ("bm9wZQ==", "1764072000", BODY),
        ("%%%", "1764072000", BODY),
    ],
)
def test_unsigned_or_changed_bodies_fail(
    signer: SendGridSigner, signature: str | None, timestamp: str | None, body: bytes
) -> None:
    if signature == "SIGNED":
        signature = signer.headers(BODY, SIGNED_AT)[sendgrid.SIGNATURE_HEADER]
    with pytest.raises(sendgrid.BadSignature):
        sendgrid.verify(signer.public_key, signature, timestamp, body, NOW)


@pytest.mark.parametrize("off", [timedelta(minutes=-5, seconds=-1), timedelta(minutes=5, seconds=1)])
def test_a_timestamp_more_than_five_minutes_off_fails_however_well_signed(
    signer: SendGridSigner, off: timedelta
) -> None:
    headers = signer.headers(BODY, SIGNED_AT)
    signature, timestamp = headers[sendgrid.SIGNATURE_HEADER], headers[sendgrid.TIMESTAMP_HEADER]
    sendgrid.verify(signer.public_key, signature, timestamp, BODY, NOW + off / 2)
    with pytest.raises(sendgrid.BadSignature):
        sendgrid.verify(signer.public_key, signature, timestamp, BODY, NOW + off)
    for unreadable in ("-1764072000", "1764072000.5", "9" * 30):
        signed = signer.headers(BODY, unreadable)
        with pytest.raises(sendgrid.BadSignature):
            sendgrid.verify(signer.public_key, signed[sendgrid.SIGNATURE_HEADER], unreadable, BODY, NOW)


def test_another_key_fails(signer: SendGridSigner) -> None:
    headers = signer.headers(BODY, SIGNED_AT)
    with pytest.raises(sendgrid.BadSignature):
        sendgrid.verify(
            SendGridSigner.make().public_key,
            headers[sendgrid.SIGNATURE_HEADER],
            headers[sendgrid.TIMESTAMP_HEADER],
            BODY,
            NOW,
        )


@pytest.mark.parametrize(
    "setting", ["not base64!", "bm9wZQ==", "-----BEGIN PUBLIC KEY-----\nx\n-----END PUBLIC KEY-----"]
)
def test_a_setting_that_is_no_key_is_the_operators_error(setting: str) -> None:
    with pytest.raises(DomainError) as raised:
        sendgrid.verify(setting, "x", "1", BODY, NOW)
    assert raised.value.status == 503


def test_events_map_onto_reports(signer: SendGridSigner) -> None:
    events = [
        sendgrid_event("processed", "a@example.com", "<1.1.a@h>"),
        sendgrid_event("bounce", "b@example.com", "<2.1.a@h>", type="bounce", status="5.0.0"),
        sendgrid_event("bounce", "c@example.com", None, type="blocked"),
        sendgrid_event("dropped", "d@example.com", None, reason="Bounced Address"),
        sendgrid_event("dropped", "e@example.com", None, reason="Spam Reporting Address"),
        sendgrid_event("dropped", "f@example.com", None, reason="Unsubscribed Address"),
        sendgrid_event("dropped", "g@example.com", None, reason="Spam Content"),
        sendgrid_event("spamreport", "h@example.com", "<3.1.a@h>"),
        sendgrid_event("group_unsubscribe", "i@example.com", None, asm_group_id=1),
        sendgrid_event("deferred", "j@example.com", None, attempt="5"),
        sendgrid_event("open", "k@example.com", None),
    ]
    body = json.dumps(events).encode()
    headers = signer.headers(body, SIGNED_AT)
    read = sendgrid.read(
        body, signer.public_key, headers[sendgrid.SIGNATURE_HEADER], headers[sendgrid.TIMESTAMP_HEADER], NOW
    )
    assert read.skipped == 2
    assert [(r.email[0], r.type, r.bounce_type, r.message_id) for r in read.reports] == [
        ("b", "bounce", "hard", "<2.1.a@h>"),
        ("c", "bounce", "blocked", None),
        ("d", "bounce", "hard", None),
        ("e", "complaint", "hard", None),
        ("f", "unsubscribe", "hard", None),
        ("g", "bounce", "soft", None),
        ("h", "complaint", "hard", "<3.1.a@h>"),
        ("i", "unsubscribe", "hard", None),
        ("j", "bounce", "soft", None),
    ]


@pytest.mark.parametrize(
    "body", [b"{}", b"[1]", b'[{"email": "a@example.com"}]', b'[{"event": "bounce"}]', b"nope"]
)
def test_signed_garbage_is_invalid(signer: SendGridSigner, body: bytes) -> None:
    headers = signer.headers(body, SIGNED_AT)
    with pytest.raises(ValidationFailed):
        sendgrid.read(
            body,
            signer.public_key,
            headers[sendgrid.SIGNATURE_HEADER],
            headers[sendgrid.TIMESTAMP_HEADER],
            NOW,
        )
