"""SendGrid's Event Webhook (`POST /webhooks/bounces/sendgrid`): a JSON array of events, signed.

    [{"email": "example@test.com", "timestamp": 1513299569, "smtp-id": "<14c5d75ce93.dfd.64b469@ismtpd-555>",
      "event": "bounce", "type": "bounce", "reason": "500 unknown recipient", "status": "5.0.0",
      "sg_event_id": "...", "sg_message_id": "..."}]

The signed webhook sends `X-Twilio-Email-Event-Webhook-Signature` (base64 of an ECDSA P-256 SHA-256
signature, DER) and `X-Twilio-Email-Event-Webhook-Timestamp`; the signed bytes are the timestamp
followed by the body as it came. The verification key (TIDINGS_SENDGRID_WEBHOOK_PUBLIC_KEY) is the
base64 DER public key SendGrid shows, or the same in PEM. Unsigned or wrongly signed: 401; so is a
timestamp (Unix seconds) that is not fresh (app/mail/bounces/providers/__init__.py).

Events: `bounce` of type `bounce` is a hard bounce, of type `blocked` a blocked one, unless its `status`
and `reason` (the receiver's code and words) say otherwise (bounce_classes.py); `dropped` (SendGrid
did not send, the address being on its own lists) is a hard bounce for `Bounced Address` and
`Invalid`, a complaint for `Spam Reporting Address`, an unsubscribe for `Unsubscribed Address`, else
soft; `spamreport` is a complaint, `unsubscribe` and `group_unsubscribe` unsubscribes; `deferred` is
soft; the rest (processed, delivered, open, click) is skipped. `smtp-id` is the Message-ID header.
"""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime
from functools import lru_cache

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from app.kit.ecdsa_key import ecdsa_public_key
from app.kit.errors import DomainError
from app.mail.bounces.providers import (
    Events,
    Hardness,
    ReportType,
    an_object,
    fresh,
    invalid,
    load_json,
    make_report,
)
from app.mail.bounces.reports import Report

SIGNATURE_HEADER = "X-Twilio-Email-Event-Webhook-Signature"
TIMESTAMP_HEADER = "X-Twilio-Email-Event-Webhook-Timestamp"

DROPPED: dict[str, tuple[ReportType, Hardness]] = {
    "bounced address": ("bounce", "hard"),
    "invalid": ("bounce", "hard"),
    "spam reporting address": ("complaint", "hard"),
    "unsubscribed address": ("unsubscribe", "hard"),
}


class BadSignature(Exception):
    pass


class BadKey(DomainError):
    def __init__(self) -> None:
        super().__init__(503, "TIDINGS_SENDGRID_WEBHOOK_PUBLIC_KEY is not an ECDSA public key.")


@lru_cache(maxsize=8)
def public_key(setting: str) -> ec.EllipticCurvePublicKey:
    try:
        return ecdsa_public_key(setting)
    except ValueError as exc:
        raise BadKey() from exc


def verify(setting: str, signature: str | None, timestamp: str | None, body: bytes, now: datetime) -> None:
    """Raises BadSignature unless `signature` signs timestamp + body under the configured key and the
    timestamp is fresh."""
    key = public_key(setting)
    if not signature or not timestamp:
        raise BadSignature()
    if not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= 12):
        raise BadSignature()
    if not fresh(datetime.fromtimestamp(int(timestamp), UTC), now):
        raise BadSignature()
    try:
        der = base64.b64decode(signature, validate=True)
        key.verify(der, timestamp.encode("utf-8", "surrogateescape") + body, ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, ValueError, binascii.Error) as exc:
        raise BadSignature() from exc


def read(body: bytes, setting: str, signature: str | None, timestamp: str | None, now: datetime) -> Events:
    """The verified body's events as reports; BadSignature, or 422 (ValidationFailed)."""
    verify(setting, signature, timestamp, body, now)
    payload = load_json(body)
    if not isinstance(payload, list):
        raise invalid("body", "The request body must be an array of events.")
    events = Events()
    for index, item in enumerate(payload):
        event = an_object(item, str(index))
        report = _report(str(index), event)
        if report is None:
            events.skipped += 1
        else:
            events.reports.append(report)
    return events


def _report(where: str, event: dict[str, object]) -> Report | None:
    kind = event.get("event")
    if not isinstance(kind, str):
        raise invalid(f"{where}.event", f"The {where}.event field is required.")
    email, message_id = event.get("email"), event.get("smtp-id")
    if kind == "bounce":
        hardness: Hardness = "blocked" if event.get("type") == "blocked" else "hard"
        diagnostic = " ".join(str(event.get(key) or "") for key in ("status", "reason")).strip()
        return make_report(where, "bounce", email, message_id, hardness, diagnostic)
    if kind == "deferred":
        return make_report(where, "bounce", email, message_id, "soft")
    if kind == "dropped":
        reason = event.get("reason")
        reason_key = reason.strip().lower() if isinstance(reason, str) else ""
        type_, dropped_hardness = DROPPED.get(reason_key, ("bounce", "soft"))
        return make_report(where, type_, email, message_id, dropped_hardness)
    if kind == "spamreport":
        return make_report(where, "complaint", email, message_id)
    if kind in ("unsubscribe", "group_unsubscribe"):
        return make_report(where, "unsubscribe", email, message_id)
    return None
