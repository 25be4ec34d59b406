"""Amazon SES through Amazon SNS (`POST /webhooks/bounces/ses`): SNS's HTTP(S) notifications, JSON.

SNS signs every message: `Signature` is base64 of an RSA signature (SignatureVersion 1: SHA1,
2: SHA256) of the message's fields, each as `Name\\nvalue\\n` in this order: Message, MessageId,
Subject (when present), Timestamp, TopicArn, Type for notifications; Message, MessageId, SubscribeURL,
Timestamp, Token, TopicArn, Type for (un)subscription confirmations. The key is in the X.509
certificate at `SigningCertURL`, which must be https://sns.<region>.amazonaws.com/....pem (the TLS
connection to Amazon vouches for it), or start with TIDINGS_SES_SNS_URL_PREFIX when that is set
(tests); certificates are fetched once and kept. Any message whose signature does not verify is 401,
and so is one whose `Timestamp` is not fresh (app/mail/bounces/providers/__init__.py).

A signed message proves SNS sent it, not whose topic it is: only topics in TIDINGS_SES_TOPIC_ARNS are
accepted (403 otherwise; `*` accepts any). The route is off (404) while that setting is empty.

- `SubscriptionConfirmation`: confirmed by fetching its SubscribeURL (the same host rule) through the
  SSRF-safe client.
- `Notification`: `Message` is SES's notification (JSON): `notificationType` (or `eventType` for
  configuration-set events) `Bounce` with `bounce.bounceType` Permanent (hard; blocked for the
  subtypes ContentRejected and AttachmentRejected, or when the recipient's `diagnosticCode` or
  `status` says so: bounce_classes.py), Transient or Undetermined (soft) and
  `bounce.bouncedRecipients[].emailAddress`; `Complaint` with
  `complaint.complainedRecipients[].emailAddress`; others (Delivery, Send, Open, ...) are skipped.
  The email's Message-ID header is `mail.commonHeaders.messageId` or the `Message-ID` of
  `mail.headers`; `mail.messageId` is SES's own id and is not used.
- `UnsubscribeConfirmation`: verified and skipped.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from app.kit.errors import DomainError
from app.kit.safe_http import OutboundError, SafeHttp
from app.mail.bounces.providers import (
    Events,
    Hardness,
    an_object,
    fresh,
    header_value,
    invalid,
    load_json,
    make_report,
)

NOTIFICATION_FIELDS = ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type")
CONFIRMATION_FIELDS = ("Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type")
SIGNATURE_FIELDS = ("SignatureVersion", "Signature", "SigningCertURL")
TYPES = ("Notification", "SubscriptionConfirmation", "UnsubscribeConfirmation")
SNS_HOST = re.compile(r"sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?")
MAX_CERTIFICATE_BYTES = 64 * 1024
FETCH_TIMEOUT = 10.0


class BadSignature(Exception):
    pass


class TopicNotAccepted(DomainError):
    def __init__(self) -> None:
        super().__init__(403, "This SNS topic is not accepted here (TIDINGS_SES_TOPIC_ARNS).")


class SnsUnreachable(DomainError):
    def __init__(self, what: str) -> None:
        super().__init__(502, f"Amazon SNS could not be reached: {what}")


@dataclass(frozen=True, slots=True)
class SnsMessage:
    fields: dict[str, str]

    @property
    def type(self) -> str:
        return self.fields["Type"]

    def string_to_sign(self) -> bytes:
        names = NOTIFICATION_FIELDS if self.type == "Notification" else CONFIRMATION_FIELDS
        return "".join(f"{n}\n{self.fields[n]}\n" for n in names if n in self.fields).encode()


def parse(body: bytes) -> SnsMessage:
    """An SNS message's fields (strings); BadSignature when it is unsigned, or 422."""
    payload = an_object(load_json(body), "body")
    kind = payload.get("Type")
    if kind not in TYPES:
        raise invalid("Type", f"The Type must be one of {', '.join(TYPES)}.")
    fields: dict[str, str] = {}
    for name in SIGNATURE_FIELDS:
        value = payload.get(name)
        if not isinstance(value, str) or not value:
            raise BadSignature()
        fields[name] = value
    for name in NOTIFICATION_FIELDS if kind == "Notification" else CONFIRMATION_FIELDS:
        value = payload.get(name)
        if name == "Subject" and value is None:
            continue
        if not isinstance(value, str):
            raise invalid(name, f"The {name} field is required.")
        fields[name] = value
    return SnsMessage(fields)


def accepts_topic(setting: str, topic_arn: str) -> bool:
    topics = {t.strip() for t in setting.split(",") if t.strip()}
    return "*" in topics or topic_arn in topics


def allowed_url(url: str, prefix: str, *, pem: bool) -> bool:
    """Whether Tidings may fetch `url` for SNS: https://sns.<region>.amazonaws.com (the .pem path for
    a certificate), or, when the prefix setting is set, a URL under that prefix only."""
    if prefix:
        return url.startswith(prefix)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return False
    return (
        parts.scheme == "https"
        and port is None
        and parts.username is None
        and SNS_HOST.fullmatch(parts.hostname or "") is not None
        and parts.netloc.lower() == (parts.hostname or "")
        and (not pem or parts.path.endswith(".pem"))
    )


def verify_signature(message: SnsMessage, certificate_pem: bytes, now: datetime) -> None:
    """Raises BadSignature unless the message is signed by the certificate's key (and the certificate
    is valid now)."""
    version = message.fields["SignatureVersion"]
    algorithm: hashes.HashAlgorithm
    if version == "1":
        algorithm = hashes.SHA1()
    elif version == "2":
        algorithm = hashes.SHA256()
    else:
        raise BadSignature()
    try:
        certificate = x509.load_pem_x509_certificate(certificate_pem)
        signature = base64.b64decode(message.fields["Signature"], validate=True)
    except (ValueError, binascii.Error) as exc:
        raise BadSignature() from exc
    if not certificate.not_valid_before_utc <= now <= certificate.not_valid_after_utc:
        raise BadSignature()
    key = certificate.public_key()
    if not isinstance(key, rsa.RSAPublicKey):
        raise BadSignature()
    try:
        key.verify(signature, message.string_to_sign(), padding.PKCS1v15(), algorithm)
    except InvalidSignature as exc:
        raise BadSignature() from exc


def signed_time(message: SnsMessage) -> datetime:
    """The message's `Timestamp` (ISO 8601, UTC): BadSignature when it is not one."""
    try:
        signed_at = datetime.fromisoformat(message.fields["Timestamp"])
    except ValueError as exc:
        raise BadSignature() from exc
    if signed_at.tzinfo is None:
        raise BadSignature()
    return signed_at


class SnsClient:
    """Fetches SNS signing certificates (kept, the last 32 by URL) and confirmation URLs, through the
    SSRF-safe client. One per app."""

    def __init__(self, *, allow_private: bool, keep: int = 32) -> None:
        self.allow_private = allow_private
        self.keep = keep
        self._certificates: OrderedDict[str, bytes] = OrderedDict()

    async def _get(self, url: str) -> tuple[int, bytes]:
        async with SafeHttp(
            allow_private=self.allow_private, max_bytes=MAX_CERTIFICATE_BYTES, timeout=FETCH_TIMEOUT
        ) as http:
            try:
                response = await http.get(url)
            except OutboundError as exc:
                raise SnsUnreachable(str(exc)) from exc
        return response.status_code, response.content

    async def certificate(self, url: str) -> bytes:
        """The certificate at `url`: BadSignature when there is none to be had (4xx, not a PEM
        certificate), SnsUnreachable (502: SNS retries) when SNS could not answer."""
        kept = self._certificates.get(url)
        if kept is not None:
            self._certificates.move_to_end(url)
            return kept
        status, content = await self._get(url)
        if status >= 500:
            raise SnsUnreachable(f"{url} answered {status}")
        if status != 200 or b"-----BEGIN CERTIFICATE-----" not in content:
            raise BadSignature()
        self._certificates[url] = content
        while len(self._certificates) > self.keep:
            self._certificates.popitem(last=False)
        return content

    async def confirm(self, url: str) -> None:
        status, _ = await self._get(url)
        if status != 200:
            raise SnsUnreachable(f"the subscription's confirmation answered {status}")


async def read(body: bytes, *, topics: str, url_prefix: str, client: SnsClient, now: datetime) -> Events:
    """A verified SNS message's reports. BadSignature, TopicNotAccepted, SnsUnreachable,
    or 422."""
    message = parse(body)
    if not accepts_topic(topics, message.fields["TopicArn"]):
        raise TopicNotAccepted()
    certificate_url = message.fields["SigningCertURL"]
    if not allowed_url(certificate_url, url_prefix, pem=True):
        raise BadSignature()
    verify_signature(message, await client.certificate(certificate_url), now)
    if not fresh(signed_time(message), now):
        raise BadSignature()
    if message.type == "SubscriptionConfirmation":
        subscribe_url = message.fields["SubscribeURL"]
        if not allowed_url(subscribe_url, url_prefix, pem=False):
            raise invalid("SubscribeURL", "The SubscribeURL is not an Amazon SNS address.")
        await client.confirm(subscribe_url)
        return Events()
    if message.type == "UnsubscribeConfirmation":
        return Events(skipped=1)
    return notification_events(message.fields["Message"])


# Permanent bounces SES files under the content, not the address: the receiver refused the sender.
BLOCKED_SUBTYPES = ("ContentRejected", "AttachmentRejected")


def notification_events(text: str) -> Events:
    """SES's notification (the SNS message's `Message`) as reports."""
    try:
        notification = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise invalid("Message", "The Message is not an SES notification (JSON).") from exc
    notification = an_object(notification, "Message")
    kind = notification.get("notificationType", notification.get("eventType"))
    mail = notification.get("mail")
    message_id = _message_id(mail) if isinstance(mail, dict) else None
    if kind == "Bounce":
        bounce = an_object(notification.get("bounce"), "Message.bounce")
        hardness: Hardness = "hard" if bounce.get("bounceType") == "Permanent" else "soft"
        if hardness == "hard" and bounce.get("bounceSubType") in BLOCKED_SUBTYPES:
            hardness = "blocked"
        where_list = "Message.bounce.bouncedRecipients"
        recipients = _addresses(bounce.get("bouncedRecipients"), where_list)
        reports = []
        for index, (where, email) in enumerate(recipients):
            recipient = bounce["bouncedRecipients"][index]
            diagnostic = recipient.get("diagnosticCode") or recipient.get("status")
            reports.append(make_report(where, "bounce", email, message_id, hardness, diagnostic))
        return Events(reports)
    if kind == "Complaint":
        complaint = an_object(notification.get("complaint"), "Message.complaint")
        recipients = _addresses(
            complaint.get("complainedRecipients"), "Message.complaint.complainedRecipients"
        )
        return Events([make_report(where, "complaint", email, message_id) for where, email in recipients])
    if not isinstance(kind, str):
        raise invalid("Message.notificationType", "The Message.notificationType field is required.")
    return Events(skipped=1)


def _message_id(mail: dict[str, Any]) -> str | None:
    common = mail.get("commonHeaders")
    if isinstance(common, dict) and isinstance(common.get("messageId"), str):
        value: str = common["messageId"]
        return value
    return header_value(mail.get("headers"), "Message-ID")


def _addresses(recipients: Any, where: str) -> list[tuple[str, Any]]:
    if not isinstance(recipients, list) or not recipients:
        raise invalid(where, f"The {where} must be a non-empty array.")
    found = []
    for index, recipient in enumerate(recipients):
        at = f"{where}.{index}"
        found.append((at, an_object(recipient, at).get("emailAddress")))
    return found
