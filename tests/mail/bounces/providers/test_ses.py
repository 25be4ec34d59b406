"""SNS signature verification (versions 1 and 2) with a certificate made here, the host rule for
certificate and confirmation URLs, and SES notifications as reports."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from app.kit.errors import ValidationFailed
from app.mail.bounces.providers import ses
from tests.mail.bounces.providers.samples import SnsSigner, ses_bounce, ses_complaint, sns_notification

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
CERT_URL = "https://sns.us-west-2.amazonaws.com/SimpleNotificationService-abc.pem"


@pytest.fixture(scope="module")
def signer() -> SnsSigner:
    return SnsSigner.make()


def message(body: dict[str, object]) -> ses.SnsMessage:
    return ses.parse(json.dumps(body).encode())


@pytest.mark.parametrize("version", ["1", "2"])
@pytest.mark.parametrize("subject", [False, True])
def test_a_signed_notification_verifies(signer: SnsSigner, version: str, subject: bool) -> None:
    body = signer.sign(
        sns_notification(ses_bounce("ann@example.com", None), CERT_URL, subject=subject), version
    )
    ses.verify_signature(message(body), signer.certificate_pem, NOW)


def test_the_signed_time_is_snss_timestamp(signer: SnsSigner) -> None:
    at = datetime(2026, 11, 25, 12, 0, 0, 123000, tzinfo=UTC)
    body = signer.sign(sns_notification(ses_bounce("ann@example.com", None), CERT_URL, published=at))
    assert body["Timestamp"] == "2026-11-25T12:00:00.123Z"
    assert ses.signed_time(message(body)) == at
    for unreadable in ("yesterday", "2026-11-25T12:00:00", ""):
        with pytest.raises(ses.BadSignature):
            ses.signed_time(message({**body, "Timestamp": unreadable}))


def test_the_string_to_sign_is_snss() -> None:
    body = {
        "Type": "Notification",
        "MessageId": "m-1",
        "TopicArn": "arn:t",
        "Subject": "S",
        "Message": "hello",
        "Timestamp": "2026-11-25T12:00:00.000Z",
        "SignatureVersion": "1",
        "Signature": "x",
        "SigningCertURL": CERT_URL,
        "UnsubscribeURL": "https://sns.us-west-2.amazonaws.com/?Action=Unsubscribe",
    }
    assert message(body).string_to_sign() == (
        b"Message\nhello\nMessageId\nm-1\nSubject\nS\nTimestamp\n2026-11-25T12:00:00.000Z\n"
        b"TopicArn\narn:t\nType\nNotification\n"
    )


@pytest.mark.parametrize(
    "change",
    [
        {"Message": json.dumps(ses_bounce("bob@example.com", None))},
        {"TopicArn": "arn:aws:sns:us-west-2:123456789012:other"},
        {"Timestamp": "2026-11-25T12:00:01.000Z"},
        {"Subject": "added"},
        {"SignatureVersion": "2"},
        {"SignatureVersion": "3"},
        {"Signature": "bm90IGEgc2lnbmF0dXJl"},
        {"Signature": "%%% not base64"},
    ],
)
def test_a_changed_field_or_signature_fails(signer: SnsSigner, change: dict[str, str]) -> None:
    body = signer.sign(sns_notification(ses_bounce("ann@example.com", None), CERT_URL))
    with pytest.raises(ses.BadSignature):
        ses.verify_signature(message({**body, **change}), signer.certificate_pem, NOW)


def test_another_key_or_an_expired_certificate_fails(signer: SnsSigner) -> None:
    body = signer.sign(sns_notification(ses_bounce("ann@example.com", None), CERT_URL))
    with pytest.raises(ses.BadSignature):
        ses.verify_signature(message(body), SnsSigner.make().certificate_pem, NOW)
    with pytest.raises(ses.BadSignature):
        ses.verify_signature(message(body), b"-----BEGIN CERTIFICATE-----\nnope\n", NOW)
    expired = SnsSigner.make(valid_from=datetime(2020, 1, 1, tzinfo=UTC), days=30)
    with pytest.raises(ses.BadSignature):
        ses.verify_signature(message(expired.sign(body)), expired.certificate_pem, NOW)


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        (CERT_URL, True),
        (
            "https://sns.eu-central-1.amazonaws.com/SimpleNotificationService-01d088a6f77103d0fe307c0069e40ed6.pem",
            True,
        ),
        ("https://sns.cn-north-1.amazonaws.com.cn/SimpleNotificationService-x.pem", True),
        ("http://sns.us-west-2.amazonaws.com/SimpleNotificationService-abc.pem", False),
        ("https://sns.us-west-2.amazonaws.com/SimpleNotificationService-abc.txt", False),
        ("https://sns.us-west-2.amazonaws.com:8443/SimpleNotificationService-abc.pem", False),
        ("https://user@sns.us-west-2.amazonaws.com/SimpleNotificationService-abc.pem", False),
        ("https://sns.us-west-2.amazonaws.com.evil.example/x.pem", False),
        ("https://evil.example/sns.us-west-2.amazonaws.com/x.pem", False),
        ("https://sqs.us-west-2.amazonaws.com/x.pem", False),
        ("https://127.0.0.1/x.pem", False),
        ("https://[::1]:99999/x.pem", False),
        ("not a url", False),
    ],
)
def test_certificates_come_only_from_amazon_sns_by_default(url: str, allowed: bool) -> None:
    assert ses.allowed_url(url, "", pem=True) is allowed


def test_the_prefix_setting_replaces_the_host_rule() -> None:
    prefix = "http://127.0.0.1:8123/"
    assert ses.allowed_url("http://127.0.0.1:8123/cert.pem", prefix, pem=True)
    assert not ses.allowed_url("http://127.0.0.1:8124/cert.pem", prefix, pem=True)
    assert not ses.allowed_url(CERT_URL, prefix, pem=True)


def test_topics() -> None:
    assert ses.accepts_topic("arn:a, arn:b", "arn:b")
    assert not ses.accepts_topic("arn:a,arn:b", "arn:c")
    assert ses.accepts_topic("*", "arn:c")


@pytest.mark.parametrize(
    ("bounce_type", "hardness"), [("Permanent", "hard"), ("Transient", "soft"), ("Undetermined", "soft")]
)
def test_bounces_map_onto_reports(bounce_type: str, hardness: str) -> None:
    events = ses.notification_events(json.dumps(ses_bounce("Ann@Example.com", "<1.2.ab@h>", bounce_type)))
    [report] = events.reports
    assert (report.type, report.email, report.message_id, report.bounce_type) == (
        "bounce",
        "Ann@Example.com",
        "<1.2.ab@h>",
        hardness,
    )


def test_complaints_and_the_message_id_from_the_headers_list() -> None:
    notification = ses_complaint("ann@example.com", "<1.2.ab@h>")
    del notification["mail"]["commonHeaders"]["messageId"]
    [report] = ses.notification_events(json.dumps(notification)).reports
    assert (report.type, report.message_id) == ("complaint", "<1.2.ab@h>")
    [without] = ses.notification_events(json.dumps(ses_complaint("ann@example.com", None))).reports
    assert without.message_id is None


def test_configuration_set_events_read_the_same() -> None:
    event = ses_bounce("ann@example.com", "<1.2.ab@h>")
    event["eventType"] = event.pop("notificationType")
    [report] = ses.notification_events(json.dumps(event)).reports
    assert (report.type, report.bounce_type, report.message_id) == ("bounce", "hard", "<1.2.ab@h>")


def test_other_notifications_are_skipped() -> None:
    delivery = {"notificationType": "Delivery", "mail": {}, "delivery": {"recipients": ["a@example.com"]}}
    assert ses.notification_events(json.dumps(delivery)).skipped == 1
    assert ses.notification_events(json.dumps({"eventType": "Open", "mail": {}})).skipped == 1


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        "{}",
        json.dumps({"notificationType": "Bounce"}),
        json.dumps(
            {"notificationType": "Bounce", "bounce": {"bounceType": "Permanent", "bouncedRecipients": []}}
        ),
        json.dumps({"notificationType": "Bounce", "bounce": {"bouncedRecipients": [{"emailAddress": 1}]}}),
        json.dumps(
            {"notificationType": "Complaint", "complaint": {"complainedRecipients": ["a@example.com"]}}
        ),
    ],
)
def test_malformed_notifications_are_invalid(text: str) -> None:
    with pytest.raises(ValidationFailed):
        ses.notification_events(text)
