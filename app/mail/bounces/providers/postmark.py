"""Postmark's webhooks (`POST /webhooks/bounces/postmark`): one record a request, JSON.

    {"RecordType": "Bounce", "ID": 4323372036854775807, "Type": "HardBounce", "TypeCode": 1,
     "MessageID": "883953f4-6105-42a2-a16a-77a8eac79483", "Email": "john@example.com",
     "BouncedAt": "2019-11-05T16:33:54.9070259Z", ...}

Authentication: the secret (TIDINGS_POSTMARK_WEBHOOK_SECRET) as the password of basic auth (Postmark
sends the credentials of a webhook URL like `https://tidings:SECRET@host/webhooks/bounces/postmark`
as an Authorization header; the user name is not checked), or as the URL's `token` parameter, or as
an `X-Tidings-Token` header (one of Postmark's custom webhook headers); else 401.

`MessageID` is Postmark's own id, not the email's Message-ID header: the header is used when the
record carries one (a `Headers` list of `{Name, Value}`), else the recipient's latest email is meant.
Records: bounces of Type `HardBounce` or `BadEmailAddress` are hard, `Blocked` blocked, `SoftBounce`,
`Transient` and `DnsError` soft, unless the receiver's reply in `Details` says otherwise (a
`HardBounce` with `550 5.7.26` is blocked: bounce_classes.py); `SpamComplaint` (a bounce type, and a
record type of its own) is a complaint and `Unsubscribe` an unsubscribe; a `SubscriptionChange` that
suppresses sending for `ManualSuppression` (the recipient unsubscribed through Postmark) is an
unsubscribe. Deliveries, opens, clicks and the other bounce types (auto-responders, challenges, ...) are
skipped.
"""

from __future__ import annotations

import base64
import binascii

from app.mail.bounces.providers import (
    Events,
    Hardness,
    an_object,
    header_value,
    invalid,
    load_json,
    make_report,
    same_secret,
)
from app.mail.bounces.reports import Report

TOKEN_HEADER = "X-Tidings-Token"
HARD = {"HardBounce", "BadEmailAddress"}
SOFT = {"SoftBounce", "Transient", "DnsError"}


def authenticated(secret: str, authorization: str, token: str | None) -> bool:
    """Whether the request carries the secret: as the basic-auth password, or as the token."""
    if token is not None:
        return same_secret(token, secret)
    scheme, _, credentials = authorization.partition(" ")
    if scheme.lower() != "basic":
        return False
    try:
        decoded = base64.b64decode(credentials.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return False
    _user, colon, password = decoded.partition(":")
    return bool(colon) and same_secret(password, secret)


def read(body: bytes) -> Events:
    """The record as reports, or 422 (ValidationFailed)."""
    record = an_object(load_json(body), "body")
    report = _report(record)
    return Events([report]) if report is not None else Events(skipped=1)


def _report(record: dict[str, object]) -> Report | None:
    kind = record.get("RecordType")
    if not isinstance(kind, str):
        raise invalid("RecordType", "The RecordType field is required.")
    message_id = header_value(record.get("Headers"), "Message-ID")
    if kind == "SubscriptionChange":
        suppressed = record.get("SuppressSending") is True
        if suppressed and record.get("SuppressionReason") == "ManualSuppression":
            return make_report("body", "unsubscribe", record.get("Recipient"), message_id)
        return None
    if kind not in ("Bounce", "SpamComplaint"):
        return None
    type_ = record.get("Type")
    email = record.get("Email")
    if kind == "SpamComplaint" or type_ == "SpamComplaint":
        return make_report("body", "complaint", email, message_id)
    if type_ == "Unsubscribe":
        return make_report("body", "unsubscribe", email, message_id)
    hardness: Hardness | None = (
        "hard" if type_ in HARD else "soft" if type_ in SOFT else "blocked" if type_ == "Blocked" else None
    )
    if hardness is None:
        if not isinstance(type_, str):
            raise invalid("Type", "The Type field is required.")
        return None
    return make_report("body", "bounce", email, message_id, hardness, record.get("Details"))
