"""POST /webhooks/bounces/{ses,postmark,sendgrid,mailgun} end to end: each provider's sample bodies,
signed as the provider signs them (SNS's certificate served by a loopback server), mark the right
contact and deliverable once; replays change nothing; unsigned or wrongly signed bodies are 401 and
change nothing; a provider whose setting is empty has no route; garbage is a clear 4xx."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker
from time_machine import TimeMachineFixture

from app.config import Settings
from app.kit.time import utcnow
from app.main import create_app
from app.models import ProviderToken
from app.openapi_docs import mail_openapi
from tests.conftest import ApiUser
from tests.mail.bounces.providers.samples import (
    TOPIC,
    SendGridSigner,
    SnsSigner,
    mailgun_body,
    mailgun_complained,
    mailgun_failed,
    postmark_bounce,
    postmark_spam_complaint,
    sendgrid_event,
    ses_bounce,
    ses_complaint,
    sns_notification,
    sns_subscription_confirmation,
)
from tests.mail.sending.conftest import Sender, SmtpSink, campaign_with_list
from tests.mail.sending.emails import contact_id_of, deliverables_of, stats_of
from tests.upstream import Upstream

ANN, BOB, CY, DEE = "ann@example.com", "bob@example.com", "cy@example.com", "dee@example.com"
POSTMARK_SECRET = "postmark-secret-0123456789"
MAILGUN_KEY = "key-3ax6xnjp29jd6fds4gc373sgvjxteol0"
CERT_PATH = "/SimpleNotificationService-0123456789abcdef.pem"
PROVIDERS = ["ses", "postmark", "sendgrid", "mailgun"]

SNS = SnsSigner.make()
SNS_IMPOSTOR = SnsSigner.make()
SENDGRID = SendGridSigner.make()
SENDGRID_IMPOSTOR = SendGridSigner.make()


@pytest.fixture
def sns_host(upstream: Upstream) -> Upstream:
    upstream.serve(CERT_PATH, SNS.certificate_pem, **{"Content-Type": "application/x-pem-file"})
    upstream.serve("/confirm", "<ConfirmSubscriptionResponse/>", **{"Content-Type": "text/xml"})
    return upstream


@pytest.fixture
def settings(settings: Settings, sns_host: Upstream) -> Settings:
    return settings.model_copy(
        update={
            "ses_topic_arns": f"arn:aws:sns:eu-west-1:123456789012:other,{TOPIC}",
            "ses_sns_url_prefix": sns_host.base + "/",
            # The loopback server is a private address.
            "outbound_allow_private": True,
            "postmark_webhook_secret": POSTMARK_SECRET,
            "sendgrid_webhook_public_key": SENDGRID.public_key,
            "mailgun_webhook_signing_key": MAILGUN_KEY,
            "bounce_stop_rate": 0.9,
            "bounce_stop_min_sent": 2,
        }
    )


# ---------------------------------------------------------------------------------------------- posting


@dataclass
class Webhook:
    """Posts one provider's reports: `kind` is hard, soft or complaint; `signed=False` signs wrongly."""

    client: TestClient
    provider: str
    cert_url: str

    def post(self, kind: str, email: str, message_id: str | None, *, signed: bool = True) -> httpx.Response:
        make = getattr(self, f"_{self.provider}")
        content, headers, params = make(kind, email, message_id, signed)
        return self.client.post(
            f"/webhooks/bounces/{self.provider}", content=content, headers=headers, params=params
        )

    def _ses(self, kind: str, email: str, message_id: str | None, signed: bool) -> Any:
        if kind == "complaint":
            notification = ses_complaint(email, message_id)
        else:
            notification = ses_bounce(email, message_id, "Permanent" if kind == "hard" else "Transient")
        signer = SNS if signed else SNS_IMPOSTOR
        body = signer.sign(sns_notification(notification, self.cert_url), version="2")
        return json.dumps(body).encode(), {"x-amz-sns-message-type": "Notification"}, {}

    def _postmark(self, kind: str, email: str, message_id: str | None, signed: bool) -> Any:
        record = {
            "hard": lambda: postmark_bounce(email),
            "soft": lambda: postmark_bounce(email, "SoftBounce", 4096),
            "complaint": lambda: postmark_spam_complaint(email),
        }[kind]()
        password = POSTMARK_SECRET if signed else POSTMARK_SECRET + "x"
        basic = base64.b64encode(f"tidings:{password}".encode()).decode()
        return json.dumps(record).encode(), {"Authorization": f"Basic {basic}"}, {}

    def _sendgrid(self, kind: str, email: str, message_id: str | None, signed: bool) -> Any:
        event = {
            "hard": lambda: sendgrid_event("bounce", email, message_id, type="bounce", status="5.1.1"),
            "soft": lambda: sendgrid_event("bounce", email, message_id, type="blocked", status="4.0.0"),
            "complaint": lambda: sendgrid_event("spamreport", email, message_id),
        }[kind]()
        body = json.dumps([sendgrid_event("delivered", email, message_id), event]).encode()
        return body, (SENDGRID if signed else SENDGRID_IMPOSTOR).headers(body), {}

    def _mailgun(self, kind: str, email: str, message_id: str | None, signed: bool) -> Any:
        # Mailgun's message-id header comes without angle brackets.
        bare = message_id.strip("<>") if message_id else None
        event = {
            "hard": lambda: mailgun_failed(email, bare),
            "soft": lambda: mailgun_failed(email, bare, "temporary"),
            "complaint": lambda: mailgun_complained(email, bare),
        }[kind]()
        body = mailgun_body(MAILGUN_KEY if signed else "key-wrong", event)
        return json.dumps(body).encode(), {"Content-Type": "application/json"}, {}


@pytest.fixture(params=PROVIDERS)
def webhook(request: pytest.FixtureRequest, client: TestClient, sns_host: Upstream) -> Webhook:
    return Webhook(client, request.param, sns_host.url(CERT_PATH))


def sent_campaign(client: TestClient, user: ApiUser, sender: Sender, emails: list[str]) -> int:
    campaign_id = campaign_with_list(client, user.headers, emails)
    assert client.post(f"/campaigns/{campaign_id}/send", headers=user.headers).status_code == 200
    assert sender.drain() == len(emails)
    return campaign_id


def contact_of(client: TestClient, user: ApiUser, email: str) -> dict[str, Any]:
    contact_id = contact_id_of(client, user.headers, email)
    response = client.get(f"/contacts/{contact_id}/activity", headers=user.headers)
    assert response.status_code == 200, response.text
    contact: dict[str, Any] = response.json()["contact"]
    return contact


def snapshot(
    client: TestClient, user: ApiUser, db: Session, emails: tuple[str, ...] = (ANN, BOB, CY, DEE)
) -> Any:
    return [(deliverables_of(db, e), contact_of(client, user, e)) for e in emails]


# ---------------------------------------------------------------------------------------------- effects


def test_each_provider_marks_the_right_contact_once_and_replays_change_nothing(
    webhook: Webhook, client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink, db: Session
) -> None:
    campaign_id = sent_campaign(client, api_user, sender, [ANN, BOB, CY, DEE])
    message_ids = {e: str(smtp_sink.to(e)[0].message["Message-ID"]) for e in (ANN, BOB, CY)}
    sends = [("hard", ANN), ("soft", BOB), ("complaint", CY)]
    answers = []
    for kind, email in sends:
        response = webhook.post(kind, email, message_ids[email])
        assert response.status_code == 200, response.text
        answers.append(response.json())
    # SendGrid's batch carries a `delivered` event besides: skipped, so counted as ignored.
    skipped = 1 if webhook.provider == "sendgrid" else 0
    assert answers == [{"processed": 1, "ignored": skipped}] * 3

    ann, bob, cy, dee = (deliverables_of(db, e)[0] for e in (ANN, BOB, CY, DEE))
    assert ann.state == "bounced" and ann.bounced_at is not None
    assert bob.state == "sent" and bob.bounced_at is None and bob.spam_at is None
    assert cy.spam_at is not None and cy.unsubscribed_at is not None and cy.bounced_at is None
    assert dee.state == "sent" and (dee.bounced_at, dee.spam_at, dee.unsubscribed_at) == (None, None, None)
    assert contact_of(client, api_user, ANN)["bounced_at"] is not None
    assert contact_of(client, api_user, BOB)["bounced_at"] is None
    assert contact_of(client, api_user, CY)["unsubscribed_at"] is not None
    stats = stats_of(client, api_user.headers, campaign_id)
    assert (stats["bounce_count"], stats["spam_count"], stats["unsubscribe_count"]) == (1, 1, 1)

    # The provider retries: the same bodies again change nothing, and are answered the same.
    before = snapshot(client, api_user, db)
    for kind, email in sends:
        response = webhook.post(kind, email, message_ids[email])
        assert response.status_code == 200
        assert response.json() == {"processed": 1, "ignored": skipped}
    assert snapshot(client, api_user, db) == before


def test_the_message_id_picks_the_email_it_names_where_the_provider_passes_it_on(
    webhook: Webhook, client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink, db: Session
) -> None:
    first = sent_campaign(client, api_user, sender, [ANN])
    list_id = client.get("/lists", headers=api_user.headers).json()["data"][0]["id"]
    second = campaign_with_list(client, api_user.headers, [])
    client.patch(f"/campaigns/{second}", json={"lists": [list_id]}, headers=api_user.headers)
    assert client.post(f"/campaigns/{second}/send", headers=api_user.headers).status_code == 200
    assert sender.drain() == 1
    older = str(smtp_sink.to(ANN)[0].message["Message-ID"])
    assert webhook.post("complaint", ANN, older).status_code == 200
    by_campaign = {row.campaign_id: row for row in deliverables_of(db, ANN)}
    if webhook.provider == "postmark":
        # Postmark's records carry Postmark's own id, not the Message-ID header: the latest email is meant.
        first, second = second, first
    assert by_campaign[first].spam_at is not None and by_campaign[second].spam_at is None


def test_a_large_sendgrid_batch_is_applied_in_chunks(
    client: TestClient, api_user: ApiUser, sender: Sender, db: Session
) -> None:
    sent_campaign(client, api_user, sender, [ANN])
    events = [sendgrid_event("bounce", f"u{i}@example.com", None, type="bounce") for i in range(2500)]
    events.append(sendgrid_event("spamreport", ANN, None))
    body = json.dumps(events).encode()
    response = client.post("/webhooks/bounces/sendgrid", content=body, headers=SENDGRID.headers(body))
    assert response.json() == {"processed": 1, "ignored": 2500}
    assert deliverables_of(db, ANN)[0].spam_at is not None


def test_unknown_addresses_are_answered_and_ignored(webhook: Webhook) -> None:
    response = webhook.post("hard", "stranger@example.com", "<1.1.ab@example.com>")
    assert response.status_code == 200
    assert response.json()["processed"] == 0


# ---------------------------------------------------------------------------------------------- replay


def post_mailgun(client: TestClient, body: dict[str, Any]) -> httpx.Response:
    return client.post("/webhooks/bounces/mailgun", json=body)


@pytest.mark.usefixtures("clock")
def test_a_mailgun_signature_sent_again_with_another_event_is_refused(
    client: TestClient, api_user: ApiUser, sender: Sender, db: Session
) -> None:
    sent_campaign(client, api_user, sender, [ANN, BOB])
    seen = mailgun_body(MAILGUN_KEY, {"event": "delivered", "recipient": ANN})
    assert post_mailgun(client, seen).json() == {"processed": 0, "ignored": 1}
    before = snapshot(client, api_user, db, (ANN, BOB))
    forged = {**seen, "event-data": mailgun_failed(BOB, None)}
    response = post_mailgun(client, forged)
    assert response.status_code == 401
    assert response.json() == {"message": "Unauthenticated."}
    assert snapshot(client, api_user, db, (ANN, BOB)) == before
    # Mailgun's own retry of the same request is answered as the first was.
    assert post_mailgun(client, seen).json() == {"processed": 0, "ignored": 1}


def test_a_stale_mailgun_signature_is_refused_and_its_token_forgotten(
    clock: TimeMachineFixture, client: TestClient, api_user: ApiUser, sender: Sender, db: Session
) -> None:
    sent_campaign(client, api_user, sender, [ANN, BOB])
    delivered = mailgun_body(MAILGUN_KEY, {"event": "delivered", "recipient": ANN})
    assert post_mailgun(client, delivered).status_code == 200
    clock.shift(timedelta(days=2))
    before = snapshot(client, api_user, db, (ANN, BOB))
    replayed = {**delivered, "event-data": mailgun_failed(BOB, None)}
    assert post_mailgun(client, replayed).status_code == 401
    assert snapshot(client, api_user, db, (ANN, BOB)) == before
    # The next accepted webhook forgets the tokens whose signatures went stale.
    fresh = mailgun_body(MAILGUN_KEY, mailgun_failed(BOB, None))
    assert post_mailgun(client, fresh).json() == {"processed": 1, "ignored": 0}
    assert db.scalar(select(func.count()).select_from(ProviderToken)) == 1


@pytest.mark.usefixtures("clock")
@pytest.mark.parametrize("provider", ["ses", "sendgrid"])
def test_a_stale_signed_time_is_refused(
    provider: str, client: TestClient, api_user: ApiUser, sender: Sender, sns_host: Upstream, db: Session
) -> None:
    sent_campaign(client, api_user, sender, [ANN])
    before = snapshot(client, api_user, db, (ANN,))
    for off in (timedelta(minutes=-6), timedelta(minutes=6)):
        if provider == "ses":
            published = utcnow() + off
            notification = sns_notification(
                ses_bounce(ANN, None), sns_host.url(CERT_PATH), published=published
            )
            content, headers = json.dumps(SNS.sign(notification)).encode(), {}
        else:
            content = json.dumps([sendgrid_event("bounce", ANN, None, type="bounce")]).encode()
            headers = SENDGRID.headers(content, str(int((utcnow() + off).timestamp())))
        response = client.post(f"/webhooks/bounces/{provider}", content=content, headers=headers)
        assert response.status_code == 401, response.text
    assert snapshot(client, api_user, db, (ANN,)) == before


# ---------------------------------------------------------------------------------------------- access


def test_a_wrongly_signed_body_is_401_and_changes_nothing(
    webhook: Webhook, client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink, db: Session
) -> None:
    sent_campaign(client, api_user, sender, [ANN, BOB, CY, DEE])
    before = snapshot(client, api_user, db)
    for kind, email in [("hard", ANN), ("complaint", CY)]:
        message_id = str(smtp_sink.to(email)[0].message["Message-ID"])
        response = webhook.post(kind, email, message_id, signed=False)
        assert response.status_code == 401, response.text
        assert response.json() == {"message": "Unauthenticated."}
    assert snapshot(client, api_user, db) == before


UNSIGNED: dict[str, tuple[bytes, dict[str, str]]] = {
    "ses": (
        json.dumps(
            sns_notification(ses_bounce(ANN, None), "https://sns.us-west-2.amazonaws.com/x.pem")
        ).encode(),
        {},
    ),
    "postmark": (json.dumps(postmark_bounce(ANN)).encode(), {}),
    "sendgrid": (json.dumps([sendgrid_event("bounce", ANN, None, type="bounce")]).encode(), {}),
    "mailgun": (json.dumps({"event-data": mailgun_failed(ANN, None)}).encode(), {}),
}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_unsigned_body_is_401(
    provider: str, client: TestClient, api_user: ApiUser, sender: Sender, db: Session
) -> None:
    sent_campaign(client, api_user, sender, [ANN])
    before = snapshot(client, api_user, db, (ANN,))
    content, headers = UNSIGNED[provider]
    response = client.post(f"/webhooks/bounces/{provider}", content=content, headers=headers)
    assert response.status_code == 401
    assert snapshot(client, api_user, db, (ANN,)) == before


SETTING_OF = {
    "ses": "ses_topic_arns",
    "postmark": "postmark_webhook_secret",
    "sendgrid": "sendgrid_webhook_public_key",
    "mailgun": "mailgun_webhook_signing_key",
}


@pytest.fixture
def unconfigured(settings: Settings, session_factory: sessionmaker[Session]) -> Iterator[TestClient]:
    app = create_app(
        settings=settings.model_copy(update=dict.fromkeys(SETTING_OF.values(), "")),
        session_factory=session_factory,
    )
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


def test_a_provider_whose_setting_is_empty_has_no_route(unconfigured: TestClient, sns_host: Upstream) -> None:
    for provider in PROVIDERS:
        webhook = Webhook(unconfigured, provider, sns_host.url(CERT_PATH))
        assert webhook.post("hard", ANN, None).status_code == 404, provider
        assert webhook.post("hard", ANN, None, signed=False).status_code == 404, provider
    assert unconfigured.post("/webhooks/bounces/elsewhere", json={}).status_code == 404


def test_every_documented_provider_route_is_served(client: TestClient) -> None:
    paths = [p for p in mail_openapi()["paths"] if p.startswith("/webhooks/bounces/")]
    assert sorted(paths) == sorted(f"/webhooks/bounces/{p}" for p in PROVIDERS)
    for path in paths:
        assert client.post(path, content=b"{}").status_code in (401, 422), path


def test_an_unknown_provider_is_404(client: TestClient) -> None:
    assert client.post("/webhooks/bounces/sparkpost", json=[]).status_code == 404
    assert client.get("/webhooks/bounces/ses").status_code == 405


# ---------------------------------------------------------------------------------------------- garbage


def signed_for(provider: str, content: bytes) -> tuple[bytes, dict[str, str], dict[str, str]]:
    """`content` with the provider's credentials, where they do not depend on the body."""
    if provider == "postmark":
        return content, {}, {"token": POSTMARK_SECRET}
    if provider == "sendgrid":
        return content, SENDGRID.headers(content), {}
    return content, {"Content-Type": "application/json"}, {}


GARBAGE = [
    b"",
    b"not json",
    b"{",
    b"123",
    b"null",
    b"[]",
    b"[1, 2]",
    b"{}",
    b"\xff\xfe\x00garbage",
    b"[" * 100_000 + b"]" * 100_000,
    b" " * (2 * 1024 * 1024 + 1),
]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("content", GARBAGE, ids=range(len(GARBAGE)))
def test_garbage_bodies_are_a_clear_4xx(client: TestClient, provider: str, content: bytes) -> None:
    body, headers, params = signed_for(provider, content)
    response = client.post(f"/webhooks/bounces/{provider}", content=body, headers=headers, params=params)
    if provider == "sendgrid" and content == b"[]":
        assert response.json() == {"processed": 0, "ignored": 0}
        return
    assert 400 <= response.status_code < 500, response.text
    message = response.json()["message"]
    assert isinstance(message, str) and message


SIGNED_GARBAGE: dict[str, list[Callable[[str], Any]]] = {
    "ses": [
        lambda cert: SNS.sign(sns_notification({"notificationType": "Bounce"}, cert)),
        lambda cert: SNS.sign({**sns_notification(ses_bounce(ANN, None), cert), "Message": "not json"}),
        lambda cert: SNS.sign(
            sns_notification({"notificationType": "Bounce", "bounce": {"bouncedRecipients": [{}]}}, cert)
        ),
        lambda cert: SNS.sign(sns_notification(ses_bounce("a\u0000@example.com", None), cert)),
        lambda cert: {**SNS.sign(sns_notification(ses_bounce(ANN, None), cert)), "Type": "Other"},
        lambda cert: {**SNS.sign(sns_notification(ses_bounce(ANN, None), cert)), "Timestamp": 5},
    ],
    "mailgun": [
        lambda _: mailgun_body(MAILGUN_KEY, {"event": "failed"}),
        lambda _: mailgun_body(MAILGUN_KEY, {"event": "failed", "recipient": ["x"]}),
        lambda _: mailgun_body(MAILGUN_KEY, {"recipient": ANN}),
        lambda _: {"signature": mailgun_body(MAILGUN_KEY, {})["signature"], "event-data": "x"},
    ],
    "sendgrid": [
        lambda _: [{"event": "bounce"}],
        lambda _: [{"event": "bounce", "email": "\ud800@example.com"}],
        lambda _: [{"email": ANN}],
        lambda _: {"event": "bounce", "email": ANN},
    ],
    "postmark": [
        lambda _: {"RecordType": "Bounce", "Type": "HardBounce"},
        lambda _: {"RecordType": "Bounce", "Email": ANN},
        lambda _: {"RecordType": 7},
        lambda _: [postmark_bounce(ANN)],
    ],
}


@pytest.mark.parametrize(
    ("provider", "index"), [(p, i) for p, makers in SIGNED_GARBAGE.items() for i in range(len(makers))]
)
def test_signed_bodies_that_are_not_the_providers_are_422(
    client: TestClient, sns_host: Upstream, provider: str, index: int
) -> None:
    payload = SIGNED_GARBAGE[provider][index](sns_host.url(CERT_PATH))
    body, headers, params = signed_for(provider, json.dumps(payload).encode())
    response = client.post(f"/webhooks/bounces/{provider}", content=body, headers=headers, params=params)
    assert response.status_code == 422, response.text
    assert response.json()["errors"]


# ---------------------------------------------------------------------------------------------- SNS


def post_sns(client: TestClient, body: dict[str, Any]) -> httpx.Response:
    return client.post("/webhooks/bounces/ses", content=json.dumps(body).encode())


@pytest.mark.parametrize("version", ["1", "2"])
def test_a_subscription_confirmation_is_confirmed_by_fetching_its_url(
    client: TestClient, sns_host: Upstream, version: str
) -> None:
    body = SNS.sign(
        sns_subscription_confirmation(
            sns_host.url("/confirm?Action=ConfirmSubscription&Token=2336"), sns_host.url(CERT_PATH)
        ),
        version,
    )
    response = post_sns(client, body)
    assert response.status_code == 200, response.text
    assert response.json() == {"processed": 0, "ignored": 0}
    [confirmed] = sns_host.requests_to("/confirm")
    assert confirmed.method == "GET" and confirmed.query["Token"] == ["2336"]


def test_a_forged_confirmation_is_not_followed(client: TestClient, sns_host: Upstream) -> None:
    confirmation = sns_subscription_confirmation(sns_host.url("/confirm"), sns_host.url(CERT_PATH))
    assert post_sns(client, SNS_IMPOSTOR.sign(confirmation)).status_code == 401
    # Signed, but its SubscribeURL is not where SNS lives.
    elsewhere = SNS.sign({**confirmation, "SubscribeURL": "http://192.0.2.1/confirm"})
    assert post_sns(client, elsewhere).status_code == 422
    assert sns_host.requests_to("/confirm") == []


def test_a_topic_not_in_the_setting_is_403(
    client: TestClient, sns_host: Upstream, api_user: ApiUser, sender: Sender, db: Session
) -> None:
    sent_campaign(client, api_user, sender, [ANN])
    other = "arn:aws:sns:us-east-1:999999999999:someone-elses"
    body = SNS.sign(sns_notification(ses_bounce(ANN, None), sns_host.url(CERT_PATH), topic=other))
    assert post_sns(client, body).status_code == 403
    confirmation = SNS.sign(
        sns_subscription_confirmation(sns_host.url("/confirm"), sns_host.url(CERT_PATH), topic=other)
    )
    assert post_sns(client, confirmation).status_code == 403
    assert sns_host.requests_to("/confirm") == []
    assert deliverables_of(db, ANN)[0].bounced_at is None


def test_the_certificate_is_fetched_once_and_only_from_allowed_urls(
    client: TestClient, sns_host: Upstream
) -> None:
    for _ in range(3):
        body = SNS.sign(sns_notification(ses_bounce("nobody@example.com", None), sns_host.url(CERT_PATH)))
        assert post_sns(client, body).status_code == 200
    assert len(sns_host.requests_to(CERT_PATH)) == 1
    # A certificate anywhere but under the allowed prefix is never fetched: 401.
    for url in ("https://sns.us-west-2.amazonaws.com.evil.example/x.pem", "http://127.0.0.2:1/x.pem"):
        body = SNS.sign(sns_notification(ses_bounce(ANN, None), url))
        assert post_sns(client, body).status_code == 401
    # Where the certificate is missing or is no certificate: 401; where SNS fails: 502 (SNS retries).
    sns_host.serve("/missing.pem", "gone", 404)
    sns_host.serve("/garbage.pem", "-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n")
    sns_host.serve("/failing.pem", "busy", 503)
    for path, status in (("/missing.pem", 401), ("/garbage.pem", 401), ("/failing.pem", 502)):
        body = SNS.sign(sns_notification(ses_bounce(ANN, None), sns_host.url(path)))
        assert post_sns(client, body).status_code == status, path


def test_the_strict_host_rule_is_the_default(
    settings: Settings, session_factory: sessionmaker[Session], sns_host: Upstream
) -> None:
    strict = settings.model_copy(update={"ses_sns_url_prefix": ""})
    with TestClient(create_app(settings=strict, session_factory=session_factory)) as client:
        body = SNS.sign(sns_notification(ses_bounce(ANN, None), sns_host.url(CERT_PATH)))
        assert post_sns(client, body).status_code == 401
    assert sns_host.requests_to(CERT_PATH) == []


def test_unsubscribe_confirmations_and_deliveries_are_skipped(client: TestClient, sns_host: Upstream) -> None:
    unsubscribed = {
        **sns_subscription_confirmation(sns_host.url("/confirm"), sns_host.url(CERT_PATH)),
        "Type": "UnsubscribeConfirmation",
    }
    assert post_sns(client, SNS.sign(unsubscribed)).json() == {"processed": 0, "ignored": 1}
    delivery = {"notificationType": "Delivery", "mail": {"messageId": "x"}, "delivery": {"recipients": [ANN]}}
    assert post_sns(client, SNS.sign(sns_notification(delivery, sns_host.url(CERT_PATH)))).json() == {
        "processed": 0,
        "ignored": 1,
    }
    assert sns_host.requests_to("/confirm") == []


def test_a_postmark_token_in_the_url_or_a_header(client: TestClient) -> None:
    body = json.dumps(postmark_bounce("nobody@example.com")).encode()
    ok = client.post("/webhooks/bounces/postmark", content=body, params={"token": POSTMARK_SECRET})
    assert ok.status_code == 200
    header = client.post(
        "/webhooks/bounces/postmark", content=body, headers={"X-Tidings-Token": POSTMARK_SECRET}
    )
    assert header.status_code == 200
    wrong = client.post("/webhooks/bounces/postmark", content=body, params={"token": "nope"})
    assert wrong.status_code == 401
