"""Mailgun's webhooks (`POST /webhooks/bounces/mailgun`): one event a request, JSON:

    {"signature": {"timestamp": "1529006854", "token": "a8ce0edb...", "signature": "d2271d12..."},
     "event-data": {"event": "failed", "severity": "permanent", "recipient": "alice@example.com",
                    "message": {"headers": {"message-id": "20130503182626.18666.16540@example.com"}}}}

The signature is the hex HMAC-SHA256 of timestamp + token under the webhook signing key
(TIDINGS_MAILGUN_WEBHOOK_SIGNING_KEY); without it, or wrong, 401 and nothing is read further.
Mailgun does not sign the event, so a signature alone proves little: its timestamp (Unix seconds) must
be fresh and its token is single-use (app/mail/bounces/providers/__init__.py), else 401 as well.
`failed` with severity `permanent` is a hard bounce (or a blocked one, when `delivery-status` carries a
policy refusal such as 5.7.1: bounce_classes.py), `temporary` a soft one; `complained` is a
complaint and `unsubscribed` an unsubscribe; other events (delivered, opened, ...) are skipped. The
email is found by the message's Message-ID header, else by the recipient's latest email.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime
from typing import Any

from app.mail.bounces.providers import (
    Events,
    Hardness,
    SingleUse,
    an_object,
    fresh,
    invalid,
    load_json,
    make_report,
    text_or_none,
)

PROVIDER = "mailgun"


class BadSignature(Exception):
    pass


def sign(signing_key: str, timestamp: str, token: str) -> str:
    return hmac.new(signing_key.encode(), (timestamp + token).encode(), hashlib.sha256).hexdigest()


def verify(signing_key: str, signature: Any) -> tuple[datetime, str]:
    """The signed time and token; BadSignature unless `signature` is Mailgun's for this key."""
    if not isinstance(signature, dict):
        raise BadSignature()
    timestamp, token, given = (signature.get(k) for k in ("timestamp", "token", "signature"))
    if isinstance(timestamp, int) and not isinstance(timestamp, bool):
        timestamp = str(timestamp)
    if not (isinstance(timestamp, str) and isinstance(token, str) and isinstance(given, str) and given):
        raise BadSignature()
    expected = sign(signing_key, timestamp, token)
    if not hmac.compare_digest(expected.encode(), given.lower().encode("utf-8", "surrogateescape")):
        raise BadSignature()
    if not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= 12):
        raise BadSignature()
    return datetime.fromtimestamp(int(timestamp), UTC), token


def read(body: bytes, signing_key: str, now: datetime) -> Events:
    """The verified body's event as reports, with its token to remember; BadSignature (also for a
    stale timestamp), or 422 (ValidationFailed)."""
    payload = load_json(body)
    if not isinstance(payload, dict):
        raise BadSignature()
    signed_at, token = verify(signing_key, payload.get("signature"))
    if not fresh(signed_at, now):
        raise BadSignature()
    events = _events(payload)
    events.single_use = SingleUse(PROVIDER, token, body, signed_at)
    return events


def _events(payload: dict[str, Any]) -> Events:
    event = an_object(payload.get("event-data"), "event-data")
    kind = event.get("event")
    message = event.get("message")
    headers = message.get("headers") if isinstance(message, dict) else None
    message_id = text_or_none(headers.get("message-id")) if isinstance(headers, dict) else None
    recipient = event.get("recipient")
    if kind == "failed":
        severity: Hardness = "soft" if event.get("severity") == "temporary" else "hard"
        report = make_report("event-data", "bounce", recipient, message_id, severity, _diagnostic(event))
        return Events([report])
    if kind == "complained":
        return Events([make_report("event-data", "complaint", recipient, message_id)])
    if kind == "unsubscribed":
        return Events([make_report("event-data", "unsubscribe", recipient, message_id)])
    if not isinstance(kind, str):
        raise invalid("event-data.event", "The event-data.event field is required.")
    return Events(skipped=1)


def _diagnostic(event: dict[str, Any]) -> str | None:
    """The receiver's code and words from `delivery-status` (`enhanced-code`, `code`, `message`,
    `description`)."""
    status = event.get("delivery-status")
    if not isinstance(status, dict):
        return None
    parts = [status.get(key) for key in ("code", "enhanced-code", "message", "description")]
    return " ".join(str(part) for part in parts if isinstance(part, str | int) and str(part).strip()) or None
