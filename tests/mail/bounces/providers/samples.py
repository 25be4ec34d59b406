"""Providers' webhook bodies as their documents show them, and their signatures made with keys the
tests create (an RSA key and self-signed certificate for SNS, an ECDSA P-256 key for SendGrid, an HMAC
key for Mailgun)."""

from __future__ import annotations

import base64
import json
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import NameOID

from app.kit.time import utcnow
from app.mail.bounces.providers import mailgun
from app.mail.bounces.providers.ses import CONFIRMATION_FIELDS, NOTIFICATION_FIELDS

TOPIC = "arn:aws:sns:us-west-2:123456789012:ses-bounces"


# ---------------------------------------------------------------------------------------------- SNS


@dataclass(frozen=True)
class SnsSigner:
    key: rsa.RSAPrivateKey
    certificate_pem: bytes

    @classmethod
    def make(cls, *, valid_from: datetime | None = None, days: int = 36500) -> SnsSigner:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sns.us-west-2.amazonaws.com")])
        # Valid for a century unless told otherwise: no test depends on the year it runs in.
        start = valid_from or datetime(2000, 1, 1, tzinfo=UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(start + timedelta(days=days))
            .sign(key, hashes.SHA256())
        )
        return cls(key, certificate.public_bytes(serialization.Encoding.PEM))

    def sign(self, message: dict[str, Any], version: str = "1") -> dict[str, Any]:
        names = NOTIFICATION_FIELDS if message["Type"] == "Notification" else CONFIRMATION_FIELDS
        text = "".join(f"{n}\n{message[n]}\n" for n in names if n in message).encode()
        algorithm = hashes.SHA1() if version == "1" else hashes.SHA256()
        signature = self.key.sign(text, padding.PKCS1v15(), algorithm)
        return {**message, "SignatureVersion": version, "Signature": base64.b64encode(signature).decode()}


def sns_time(at: datetime | None = None) -> str:
    """SNS's `Timestamp` (ISO 8601, milliseconds, Z) of `at`, or of now: a message is signed when sent."""
    return (at or utcnow()).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def sns_notification(
    message: dict[str, Any],
    cert_url: str,
    *,
    topic: str = TOPIC,
    subject: bool = False,
    published: datetime | None = None,
) -> dict[str, Any]:
    """SNS's HTTP notification around an SES notification (unsigned: SnsSigner.sign adds it),
    published now unless told when."""
    body = {
        "Type": "Notification",
        "MessageId": "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324",
        "TopicArn": topic,
        "Message": json.dumps(message),
        "Timestamp": sns_time(published),
        "SigningCertURL": cert_url,
        "UnsubscribeURL": "https://sns.us-west-2.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=" + topic,
    }
    if subject:
        body["Subject"] = "Amazon SES Email Event Notification"
    return body


def sns_subscription_confirmation(subscribe_url: str, cert_url: str, *, topic: str = TOPIC) -> dict[str, Any]:
    return {
        "Type": "SubscriptionConfirmation",
        "MessageId": "165545c9-2a5c-472c-8df2-7ff2be2b3b1b",
        "Token": "2336412f37fb687f5d51e6e241d09c805a5a57b30d712f794cc5f6a988666d92768dd60a747ba6f3beb7"
        "1854e285d6ad02428b09ceece29417f1f02d609c582afbacc99c583a916b9981dd2728f4ae6fdb82efd087cc",
        "TopicArn": topic,
        "Message": f"You have chosen to subscribe to the topic {topic}.\n"
        "To confirm the subscription, visit the SubscribeURL included in this message.",
        "SubscribeURL": subscribe_url,
        "Timestamp": sns_time(),
        "SigningCertURL": cert_url,
    }


def ses_bounce(email: str, message_id: str | None, bounce_type: str = "Permanent") -> dict[str, Any]:
    """SES's bounce notification, as in "Amazon SNS notification examples for Amazon SES"."""
    headers = [
        {"name": "From", "value": '"Sender Name" <sender@example.com>'},
        {"name": "To", "value": f'"Recipient Name" <{email}>'},
        {"name": "Subject", "value": "Message sent from Amazon SES"},
    ]
    common: dict[str, Any] = {
        "from": ["Sender Name <sender@example.com>"],
        "to": [f"Recipient Name <{email}>"],
        "subject": "Message sent from Amazon SES",
    }
    if message_id is not None:
        headers.append({"name": "Message-ID", "value": message_id})
        common["messageId"] = message_id
    return {
        "notificationType": "Bounce",
        "bounce": {
            "feedbackId": "0100015fa8d2f5ad-7c4e4b1d-2f0a-4a2b-9f2e-8f3c9a3e1e9a-000000",
            "bounceType": bounce_type,
            "bounceSubType": "General",
            "bouncedRecipients": [
                {
                    "emailAddress": email,
                    "action": "failed",
                    "status": "5.1.1",
                    "diagnosticCode": "smtp; 550 5.1.1 user unknown",
                }
            ],
            "timestamp": "2026-11-25T11:59:58.000Z",
            "remoteMtaIp": "203.0.113.7",
            "reportingMTA": "dsn; a8-76.smtp-out.amazonses.com",
        },
        "mail": {
            "timestamp": "2026-11-25T11:59:57.000Z",
            "source": "sender@example.com",
            "sourceArn": "arn:aws:ses:us-west-2:123456789012:identity/sender@example.com",
            "sourceIp": "127.0.3.0",
            "sendingAccountId": "123456789012",
            "messageId": "0100015fa8d2f4bb-9c2b8e2a-7b5e-4a41-8d4d-1b3f1e2d7c6a-000000",
            "destination": [email],
            "headersTruncated": False,
            "headers": headers,
            "commonHeaders": common,
        },
    }


def ses_complaint(email: str, message_id: str | None) -> dict[str, Any]:
    notification = ses_bounce(email, message_id)
    del notification["bounce"]
    notification["notificationType"] = "Complaint"
    notification["complaint"] = {
        "userAgent": "ExampleCorp Feedback Loop (V0.01)",
        "complainedRecipients": [{"emailAddress": email}],
        "complaintFeedbackType": "abuse",
        "arrivalDate": "2026-11-25T11:59:59.000Z",
        "timestamp": "2026-11-25T12:00:00.000Z",
        "feedbackId": "000001378603177f-18c07c78-fa81-4a58-9dd1-fedc3cb8f49a-000000",
    }
    return notification


# ---------------------------------------------------------------------------------------------- Postmark


def postmark_bounce(email: str, type_: str = "HardBounce", type_code: int = 1) -> dict[str, Any]:
    """Postmark's bounce webhook, as in its "Bounce webhook" documentation."""
    return {
        "RecordType": "Bounce",
        "MessageStream": "outbound",
        "ID": 4323372036854775807,
        "Type": type_,
        "TypeCode": type_code,
        "Name": "Hard bounce",
        "Tag": "Test",
        "MessageID": "883953f4-6105-42a2-a16a-77a8eac79483",
        "Metadata": {"a_key": "a_value", "b_key": "b_value"},
        "ServerID": 23,
        "Description": "The server was unable to deliver your message (ex: unknown user, mailbox not found).",
        "Details": "Test bounce details",
        "Email": email,
        "From": "sender@example.com",
        "BouncedAt": "2026-11-25T16:33:54.9070259Z",
        "DumpAvailable": True,
        "Inactive": True,
        "CanActivate": True,
        "Subject": "Test subject",
        "Content": "<Full dump of bounce>",
    }


def postmark_spam_complaint(email: str) -> dict[str, Any]:
    """Postmark's spam complaint webhook."""
    return {
        "RecordType": "SpamComplaint",
        "MessageStream": "outbound",
        "ID": 42,
        "Type": "SpamComplaint",
        "TypeCode": 512,
        "Name": "Spam complaint",
        "Tag": "Test",
        "MessageID": "00000000-0000-0000-0000-000000000000",
        "Metadata": {"a_key": "a_value"},
        "ServerID": 1234,
        "Description": "",
        "Details": "Test spam complaint details",
        "Email": email,
        "From": "sender@example.com",
        "BouncedAt": "2026-11-25T16:33:54.9070259Z",
        "DumpAvailable": True,
        "Inactive": True,
        "CanActivate": False,
        "Subject": "Test subject",
        "Content": "<Abuse report dump>",
    }


# ---------------------------------------------------------------------------------------------- SendGrid


@dataclass(frozen=True)
class SendGridSigner:
    key: ec.EllipticCurvePrivateKey

    @classmethod
    def make(cls) -> SendGridSigner:
        return cls(ec.generate_private_key(ec.SECP256R1()))

    @property
    def public_key(self) -> str:
        """The verification key as SendGrid's settings page shows it: base64 of the DER public key."""
        der = self.key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return base64.b64encode(der).decode()

    def headers(self, body: bytes, timestamp: str | None = None) -> dict[str, str]:
        """The signature headers of `body`, signed now unless `timestamp` (Unix seconds) says when."""
        timestamp = timestamp or str(int(utcnow().timestamp()))
        signature = self.key.sign(timestamp.encode() + body, ec.ECDSA(hashes.SHA256()))
        return {
            "X-Twilio-Email-Event-Webhook-Signature": base64.b64encode(signature).decode(),
            "X-Twilio-Email-Event-Webhook-Timestamp": timestamp,
            "Content-Type": "application/json",
        }


def sendgrid_event(event: str, email: str, smtp_id: str | None, **more: Any) -> dict[str, Any]:
    """One event of SendGrid's Event Webhook, as in its "Event Webhook Reference"."""
    body: dict[str, Any] = {
        "email": email,
        "timestamp": 1764072000,
        "event": event,
        "category": "cat facts",
        "sg_event_id": "6g4ZI7SA-xmRDv57GoPIPw==",
        "sg_message_id": "14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0",
        **more,
    }
    if smtp_id is not None:
        body["smtp-id"] = smtp_id
    return body


# ---------------------------------------------------------------------------------------------- Mailgun


def mailgun_body(
    signing_key: str,
    event_data: dict[str, Any],
    token: str | None = None,
    signed_at: datetime | None = None,
) -> dict[str, Any]:
    """A signed webhook as Mailgun sends it: signed now, with a new random token (as each of Mailgun's
    requests has), unless told otherwise."""
    timestamp = str(int((signed_at or utcnow()).timestamp()))
    token = token or secrets.token_hex(25)
    return {
        "signature": {
            "timestamp": timestamp,
            "token": token,
            "signature": mailgun.sign(signing_key, timestamp, token),
        },
        "event-data": event_data,
    }


def mailgun_failed(email: str, message_id: str | None, severity: str = "permanent") -> dict[str, Any]:
    """Mailgun's `failed` event, as in its webhooks documentation's sample."""
    headers: dict[str, Any] = {
        "to": email,
        "from": "Bob <bob@example.com>",
        "subject": "Test permanent_fail webhook",
    }
    if message_id is not None:
        headers["message-id"] = message_id
    return {
        "id": "G9Bn5sl1TC6nu79C8C0bwg",
        "timestamp": 1521233195.375624,
        "log-level": "error",
        "event": "failed",
        "severity": severity,
        "reason": "suppress-bounce",
        "envelope": {"sender": "bob@example.com", "transport": "smtp", "targets": email},
        "flags": {
            "is-routed": False,
            "is-authenticated": True,
            "is-system-test": False,
            "is-test-mode": False,
        },
        "delivery-status": {
            "attempt-no": 1,
            "message": "",
            "code": 605,
            "description": "Not delivering to previously bounced address",
            "session-seconds": 0.0,
        },
        "message": {"headers": headers, "attachments": [], "size": 111},
        "recipient": email,
        "recipient-domain": email.split("@")[1],
        "storage": {
            "url": "https://se.api.mailgun.net/v3/domains/example.com/messages/message_key",
            "key": "message_key",
        },
        "campaigns": [],
        "tags": ["my_tag_1", "my_tag_2"],
        "user-variables": {"my_var_1": "Mailgun Variable #1"},
    }


def mailgun_complained(email: str, message_id: str | None) -> dict[str, Any]:
    event = mailgun_failed(email, message_id)
    for key in ("severity", "reason", "delivery-status", "log-level"):
        del event[key]
    event["event"] = "complained"
    return event
