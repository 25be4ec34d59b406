"""Account webhooks (events out): the /webhooks routes, and the events they receive, signed as Standard
Webhooks specifies, checked by the `standardwebhooks` library on a loopback receiver: every event
type, retries on 5xx with the same `webhook-id`, no retry on 4xx, order per contact, the delivery log,
replays, the 24-hour limit and a dead worker's events; the secret shown only when made or rotated, and
a rotation's grace period, in which deliveries carry a signature by each secret."""

from __future__ import annotations

import asyncio
import base64
import json
from datetime import datetime, timedelta
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker
from standardwebhooks import Webhook, WebhookVerificationError
from time_machine import TimeMachineFixture

from app.config import Settings
from app.db import transaction
from app.kit.time import utcnow
from app.mail.events.delivery import EventDelivery
from app.mail.events.described import CampaignEvent, ContactEvent
from app.mail.events.queue import MAX_ATTEMPTS, RETRY_DELAYS, claim_events, take_back_stale
from app.mail.sending.tokens import MailTokens
from app.mail.webhook_service import MAX_WEBHOOKS_PER_ACCOUNT
from app.models import Campaign, Contact, Deliverable, WebhookEvent
from tests.conftest import ApiUser
from tests.factories import add_campaign, add_deliverable, create_contact, create_list
from tests.upstream import Upstream, respond

pytestmark = pytest.mark.usefixtures("clock")

ALL_EVENTS = [
    "contact.subscribed",
    "contact.unsubscribed",
    "contact.bounced",
    "contact.complained",
    "contact.opened",
    "contact.clicked",
    "campaign.sent",
    "campaign.paused",
    "campaign.resumed",
    "campaign.cancelled",
]


def create_hook(
    client: TestClient, user: ApiUser, url: str, events: list[str] | None = None
) -> dict[str, Any]:
    body = {"url": url, "events": events or ALL_EVENTS}
    response = client.post("/webhooks", json=body, headers=user.headers)
    assert response.status_code == 201, response.text
    return response.json()


@pytest.fixture
def deliver(settings: Settings, session_factory: sessionmaker[Session]) -> Any:
    """deliver() -> events attempted: the delivery job, until nothing is due now."""
    private = settings.model_copy(update={"outbound_allow_private": True})

    def run() -> int:
        async def main() -> int:
            job = EventDelivery(private, session_factory)
            try:
                return await job.drain()
            finally:
                await job.aclose()

        return asyncio.run(main())

    return run


def received(upstream: Upstream, secret: str, path: str = "/hook") -> list[dict[str, Any]]:
    """Every body the receiver got, each verified by the library (which raises on a bad signature)."""
    bodies = []
    for seen in upstream.requests_to(path):
        body = Webhook(secret).verify(seen.body, seen.headers)
        assert_described(body)
        bodies.append(body)
    return bodies


def assert_described(body: dict[str, Any]) -> None:
    """The body is what the OpenAPI document's `webhooks` say: its model validates it, with no key the
    model does not declare."""
    model = CampaignEvent if body["type"] == "campaign.sent" else ContactEvent
    parsed = model.model_validate(body)
    assert parsed.model_dump(exclude_unset=True) == body


def answering(*statuses: int) -> Any:
    """A receiver's handler answering these statuses, one a request, in order."""
    answers = iter(statuses)

    def handle(request: Any) -> None:
        respond("", next(answers))(request)

    return handle


def sent_email(db: Session, user: ApiUser, email: str = "ann@example.com") -> tuple[int, int, int]:
    """A contact with one sent campaign email: (contact id, campaign id, deliverable id)."""
    campaign_id = add_campaign(db, user.account_id, "Spring")
    contact_id = db.scalar(select(Contact.id).where(Contact.email_key == email))
    assert contact_id is not None
    deliverable_id = add_deliverable(
        db, user.account_id, campaign_id, contact_id, state="sent", sent_at=utcnow(), message_id="<1.1.a@x>"
    )
    return contact_id, campaign_id, deliverable_id


# ------------------------------------------------------------------------------------------- routes


def test_create_list_get_and_delete_a_webhook(client: TestClient, api_user: ApiUser) -> None:
    made = create_hook(client, api_user, "https://example.com/hook", ["contact.opened", "contact.opened"])
    assert made["url"] == "https://example.com/hook" and made["events"] == ["contact.opened"]
    assert made["secret"].startswith("whsec_") and len(base64.b64decode(made["secret"][6:])) == 32
    assert set(made) == {"id", "url", "events", "secret", "created_at"}
    listed = client.get("/webhooks", headers=api_user.headers).json()
    assert [hook["id"] for hook in listed["data"]] == [made["id"]] and listed["total"] == 1
    # The secret is shown once, in the 201: never again.
    shown = {key: value for key, value in made.items() if key != "secret"}
    assert listed["data"] == [shown]
    assert client.get(f"/webhooks/{made['id']}", headers=api_user.headers).json() == shown
    assert made["secret"] not in client.get("/webhooks", headers=api_user.headers).text
    gone = client.delete(f"/webhooks/{made['id']}", headers=api_user.headers)
    assert gone.status_code == 200 and gone.json() == {"message": "Webhook deleted."}
    assert client.get(f"/webhooks/{made['id']}", headers=api_user.headers).status_code == 404
    assert client.delete(f"/webhooks/{made['id']}", headers=api_user.headers).status_code == 404


def test_a_given_secret_is_kept(client: TestClient, api_user: ApiUser) -> None:
    secret = "whsec_" + base64.b64encode(b"k" * 24).decode()
    body = {"url": "http://example.com/h", "events": ["campaign.sent"], "secret": secret}
    made = client.post("/webhooks", json=body, headers=api_user.headers)
    assert made.status_code == 201 and made.json()["secret"] == secret


def test_another_accounts_webhook_is_not_found(client: TestClient, api_user: ApiUser, make_user: Any) -> None:
    theirs = create_hook(client, make_user(), "https://example.com/theirs")
    for method in ("GET", "DELETE"):
        assert (
            client.request(method, f"/webhooks/{theirs['id']}", headers=api_user.headers).status_code == 404
        )
    log = client.get(f"/webhooks/{theirs['id']}/deliveries", headers=api_user.headers)
    assert log.status_code == 404 and log.json() == {"message": "Webhook not found."}
    assert client.get("/webhooks/" + "x" * 200, headers=api_user.headers).status_code in (404, 422)


def test_webhooks_need_a_token_and_a_paid_plan(client: TestClient, make_user: Any) -> None:
    assert client.get("/webhooks").status_code == 401
    free = make_user(plan="free")
    answer = client.post(
        "/webhooks", json={"url": "https://e.com", "events": ["contact.opened"]}, headers=free.headers
    )
    assert answer.status_code == 403


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "url"),
        ({"url": "https://e.com/h"}, "events"),
        ({"url": "https://e.com/h", "events": []}, "events"),
        ({"url": "https://e.com/h", "events": ["contact.eaten"]}, "events.0"),
        ({"url": "https://e.com/h", "events": "contact.opened"}, "events"),
        ({"url": "ftp://e.com/h", "events": ["contact.opened"]}, "url"),
        ({"url": "https://", "events": ["contact.opened"]}, "url"),
        ({"url": 7, "events": ["contact.opened"]}, "url"),
        ({"url": "https://e.com/" + "a" * 2100, "events": ["contact.opened"]}, "url"),
        ({"url": "https://e.com/h", "events": ["contact.opened"], "secret": "whsec_%%%"}, "secret"),
        ({"url": "https://e.com/h", "events": ["contact.opened"], "secret": "whsec_" + "QQ=="}, "secret"),
        ({"url": "https://e.com/h\x00", "events": ["contact.opened"]}, "url"),
    ],
)
def test_garbage_bodies_are_422_and_make_nothing(
    client: TestClient, api_user: ApiUser, body: dict[str, Any], field: str
) -> None:
    answer = client.post("/webhooks", json=body, headers=api_user.headers)
    assert answer.status_code == 422, answer.text
    assert field in answer.json()["errors"], answer.json()
    assert client.get("/webhooks", headers=api_user.headers).json()["total"] == 0


@pytest.mark.parametrize("raw", [b"", b"{", b"[1, 2]", b"null", b"\xff\xfe"])
def test_bodies_that_are_not_a_json_object_are_4xx(client: TestClient, api_user: ApiUser, raw: bytes) -> None:
    headers = {**api_user.headers, "Content-Type": "application/json"}
    answer = client.post("/webhooks", content=raw, headers=headers)
    assert 400 <= answer.status_code < 500, answer.text
    assert client.get("/webhooks", headers=api_user.headers).json()["total"] == 0


def test_an_account_has_at_most_twenty_webhooks(client: TestClient, api_user: ApiUser) -> None:
    for n in range(MAX_WEBHOOKS_PER_ACCOUNT):
        create_hook(client, api_user, f"https://example.com/{n}", ["contact.opened"])
    answer = client.post(
        "/webhooks", json={"url": "https://e.com", "events": ["contact.opened"]}, headers=api_user.headers
    )
    assert answer.status_code == 422 and "url" in answer.json()["errors"]


def test_a_rotated_secret_is_shown_once_and_the_old_one_signs_beside_it_for_a_day(
    client: TestClient, api_user: ApiUser, upstream: Upstream, deliver: Any, clock: TimeMachineFixture
) -> None:
    upstream.serve("/hook", "", 204)
    hook = create_hook(client, api_user, upstream.url("/hook"), ["contact.subscribed"])
    old = hook["secret"]
    before = utcnow()
    rotated = client.post(f"/webhooks/{hook['id']}/rotate-secret", headers=api_user.headers)
    assert rotated.status_code == 200, rotated.text
    new = rotated.json()["secret"]
    assert new.startswith("whsec_") and new != old
    assert set(rotated.json()) == {"id", "secret", "previous_secret_expires_at"}
    assert rotated.json()["id"] == hook["id"]
    expires = datetime.fromisoformat(rotated.json()["previous_secret_expires_at"])
    assert before + timedelta(hours=24) <= expires <= utcnow() + timedelta(hours=24)
    for shown in (
        client.get("/webhooks", headers=api_user.headers),
        client.get(f"/webhooks/{hook['id']}", headers=api_user.headers),
    ):
        assert new not in shown.text and old not in shown.text

    news = create_list(client, api_user)["id"]
    create_contact(client, api_user, "ann@example.com", lists=[news])
    assert deliver() == 1
    [during] = upstream.requests_to("/hook")
    assert len(during.headers["webhook-signature"].split(" ")) == 2
    # A receiver with either secret verifies the delivery (the library takes any matching signature).
    assert Webhook(old).verify(during.body, during.headers) == Webhook(new).verify(
        during.body, during.headers
    )

    clock.shift(timedelta(hours=24, seconds=1))
    create_contact(client, api_user, "bob@example.com", lists=[news])
    assert deliver() == 1
    after = upstream.requests_to("/hook")[1]
    assert len(after.headers["webhook-signature"].split(" ")) == 1
    Webhook(new).verify(after.body, after.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(old).verify(after.body, after.headers)


def test_a_rotation_may_take_the_new_secret_and_refuses_garbage(
    client: TestClient, api_user: ApiUser, make_user: Any
) -> None:
    hook = create_hook(client, api_user, "https://example.com/hook")
    given = "whsec_" + base64.b64encode(b"n" * 32).decode()
    rotate = f"/webhooks/{hook['id']}/rotate-secret"
    answer = client.post(rotate, json={"secret": given}, headers=api_user.headers)
    assert answer.status_code == 200 and answer.json()["secret"] == given
    bad = client.post(rotate, json={"secret": "whsec_%%%"}, headers=api_user.headers)
    assert bad.status_code == 422 and "secret" in bad.json()["errors"]
    theirs = create_hook(client, make_user(), "https://example.com/theirs")
    assert client.post(f"/webhooks/{theirs['id']}/rotate-secret", headers=api_user.headers).status_code == 404
    assert client.post(rotate).status_code == 401


# ------------------------------------------------------------------------------------------- events


def test_every_contact_event_arrives_signed_once(
    client: TestClient, api_user: ApiUser, upstream: Upstream, deliver: Any, db: Session, settings: Settings
) -> None:
    upstream.serve("/hook", "", 204)
    hook = create_hook(client, api_user, upstream.url("/hook"))
    news = create_list(client, api_user, "News")
    create_contact(client, api_user, "ann@example.com", lists=[news["id"]])
    contact_id, campaign_id, deliverable_id = sent_email(db, api_user)
    tokens = MailTokens(settings.resolved_secret_key)
    assert client.get(f"/t/o/{tokens.open_token(deliverable_id)}").status_code == 200
    assert client.get(f"/t/o/{tokens.open_token(deliverable_id)}").status_code == 200  # a repeat: no event
    click = client.get(
        f"/t/c/{tokens.click_token(deliverable_id, 'https://example.com/a')}", follow_redirects=False
    )
    assert click.status_code == 302
    assert client.post(f"/u/{tokens.unsubscribe_token(deliverable_id)}").status_code == 200

    assert deliver() == 4
    bodies = received(upstream, hook["secret"])
    assert [body["type"] for body in bodies] == [
        "contact.subscribed",
        "contact.opened",
        "contact.clicked",
        "contact.unsubscribed",
    ]
    contact = {"id": contact_id, "email": "ann@example.com"}
    assert bodies[0]["data"] == {"contact": contact, "list_id": news["id"]}
    assert bodies[1]["data"] == {"contact": contact, "campaign_id": campaign_id}
    assert bodies[3]["data"] == {"contact": contact}
    assert all(body["timestamp"].endswith("Z") for body in bodies)
    ids = [seen.headers["webhook-id"] for seen in upstream.requests_to("/hook")]
    assert len(set(ids)) == 4
    assert deliver() == 0  # delivered once


def test_a_tampered_or_replayed_delivery_is_detected_by_the_library(
    client: TestClient, api_user: ApiUser, upstream: Upstream, deliver: Any, clock: TimeMachineFixture
) -> None:
    upstream.serve("/hook", "", 204)
    hook = create_hook(client, api_user, upstream.url("/hook"), ["contact.subscribed"])
    create_contact(client, api_user, "ann@example.com", lists=[create_list(client, api_user)["id"]])
    deliver()
    [seen] = upstream.requests_to("/hook")
    verifier = Webhook(hook["secret"])
    verifier.verify(seen.body, seen.headers)
    with pytest.raises(WebhookVerificationError):
        verifier.verify(seen.body.replace(b"ann@", b"eve@"), seen.headers)
    with pytest.raises(WebhookVerificationError):
        verifier.verify(seen.body, {**seen.headers, "webhook-id": "msg_999999"})
    with pytest.raises(WebhookVerificationError):
        Webhook("whsec_" + base64.b64encode(b"o" * 32).decode()).verify(seen.body, seen.headers)
    clock.shift(timedelta(minutes=6))  # a replay later than the library's five-minute tolerance
    with pytest.raises(WebhookVerificationError):
        verifier.verify(seen.body, seen.headers)


def test_only_the_events_asked_for_are_sent(
    client: TestClient, api_user: ApiUser, upstream: Upstream, deliver: Any, make_user: Any
) -> None:
    upstream.serve("/hook", "", 204)
    upstream.serve("/other", "", 204)
    create_hook(client, api_user, upstream.url("/hook"), ["contact.unsubscribed"])
    create_hook(client, make_user(), upstream.url("/other"))  # another account's: hears nothing of ours
    create_contact(client, api_user, "ann@example.com", lists=[create_list(client, api_user)["id"]])
    assert deliver() == 0
    assert (
        client.patch("/unsubscribe", json={"email": "ann@example.com"}, headers=api_user.headers).status_code
        == 200
    )
    assert deliver() == 1
    assert [json.loads(seen.body)["type"] for seen in upstream.requests_to("/hook")] == [
        "contact.unsubscribed"
    ]
    assert upstream.requests_to("/other") == []


def test_a_5xx_is_retried_with_the_same_id_and_logged(
    client: TestClient, api_user: ApiUser, upstream: Upstream, deliver: Any, clock: TimeMachineFixture
) -> None:
    upstream.route("/hook", answering(503, 204))
    hook = create_hook(client, api_user, upstream.url("/hook"), ["contact.subscribed"])
    create_contact(client, api_user, "ann@example.com", lists=[create_list(client, api_user)["id"]])
    assert deliver() == 1
    assert deliver() == 0  # the retry waits its second
    clock.shift(timedelta(seconds=2))
    assert deliver() == 1
    first, second = upstream.requests_to("/hook")
    assert first.headers["webhook-id"] == second.headers["webhook-id"] and first.body == second.body
    assert len(received(upstream, hook["secret"])) == 2
    log = client.get(f"/webhooks/{hook['id']}/deliveries", headers=api_user.headers).json()
    assert [(a["attempt"], a["state"], a["http_status"]) for a in log["data"]] == [
        (2, "succeeded", 204),
        (1, "failed", 503),
    ]
    assert log["data"][1]["error"] == "the receiver answered HTTP 503"
    assert log["data"][0]["event_id"] == first.headers["webhook-id"]


def test_a_4xx_is_not_retried(
    client: TestClient,
    api_user: ApiUser,
    upstream: Upstream,
    deliver: Any,
    clock: TimeMachineFixture,
    db: Session,
) -> None:
    upstream.serve("/hook", "no", 410)
    create_hook(client, api_user, upstream.url("/hook"), ["contact.subscribed"])
    create_contact(client, api_user, "ann@example.com", lists=[create_list(client, api_user)["id"]])
    assert deliver() == 1
    clock.shift(timedelta(hours=1))
    assert deliver() == 0
    db.expire_all()
    assert db.scalars(select(WebhookEvent.state)).all() == ["failed"]


def test_a_receiver_that_never_answers_2xx_is_given_up_after_the_last_attempt(
    client: TestClient,
    api_user: ApiUser,
    upstream: Upstream,
    deliver: Any,
    clock: TimeMachineFixture,
    db: Session,
) -> None:
    upstream.serve("/hook", "", 500)
    create_hook(client, api_user, upstream.url("/hook"), ["contact.subscribed"])
    create_contact(client, api_user, "ann@example.com", lists=[create_list(client, api_user)["id"]])
    for delay in RETRY_DELAYS:
        assert deliver() == 1
        clock.shift(delay + timedelta(seconds=1))
    assert deliver() == 1  # the last attempt
    clock.shift(timedelta(hours=24))
    assert deliver() == 0
    assert len(upstream.requests_to("/hook")) == MAX_ATTEMPTS == len(RETRY_DELAYS) + 1
    db.expire_all()
    [event] = db.scalars(select(WebhookEvent)).all()
    assert event.state == "failed" and event.attempts == MAX_ATTEMPTS
    assert event.completed_at is not None and event.completed_at - event.created_at <= timedelta(hours=24)


def test_a_contacts_events_keep_their_order_while_one_waits_for_a_retry(
    client: TestClient, api_user: ApiUser, upstream: Upstream, deliver: Any, clock: TimeMachineFixture
) -> None:
    upstream.route("/hook", answering(500, 204, 204, 204))
    hook = create_hook(
        client, api_user, upstream.url("/hook"), ["contact.subscribed", "contact.unsubscribed"]
    )
    create_contact(client, api_user, "ann@example.com", lists=[create_list(client, api_user)["id"]])
    client.patch("/unsubscribe", json={"email": "ann@example.com"}, headers=api_user.headers)
    assert deliver() == 1  # the subscription fails; the unsubscription waits behind it
    clock.shift(timedelta(seconds=2))
    assert deliver() == 2
    assert [body["type"] for body in received(upstream, hook["secret"])] == [
        "contact.subscribed",
        "contact.subscribed",
        "contact.unsubscribed",
    ]


def test_bounce_and_complaint_reports_tell_once(
    client: TestClient, api_user: ApiUser, upstream: Upstream, deliver: Any, db: Session, settings: Settings
) -> None:
    upstream.serve("/hook", "", 204)
    hook = create_hook(client, api_user, upstream.url("/hook"), ["contact.bounced", "contact.complained"])
    create_contact(client, api_user, "ann@example.com")
    create_contact(client, api_user, "bob@example.com")
    ann = sent_email(db, api_user, "ann@example.com")[0]
    bob = sent_email(db, api_user, "bob@example.com")[0]
    secret = "bounce-secret"
    app_settings = client.app.state.settings  # type: ignore[attr-defined]
    app_settings.bounce_webhook_secret = secret
    reports = [
        {"type": "bounce", "email": "ann@example.com", "bounce_type": "hard"},
        {"type": "complaint", "email": "bob@example.com"},
    ]
    for _ in range(2):  # the relay retries: the second changes nothing
        answer = client.post("/webhooks/bounces", json=reports, headers={"Authorization": f"Bearer {secret}"})
        assert answer.status_code == 200, answer.text
    deliver()
    bodies = received(upstream, hook["secret"])
    assert sorted((body["type"], body["data"]["contact"]["id"]) for body in bodies) == sorted(
        [("contact.bounced", ann), ("contact.complained", bob)]
    )


def test_a_finished_campaign_is_told_once(
    client: TestClient, api_user: ApiUser, upstream: Upstream, deliver: Any, db: Session
) -> None:
    upstream.serve("/hook", "", 204)
    hook = create_hook(client, api_user, upstream.url("/hook"), ["campaign.sent"])
    create_contact(client, api_user, "ann@example.com")
    _, campaign_id, deliverable_id = sent_email(db, api_user)
    db.execute(update(Campaign).where(Campaign.id == campaign_id).values(sent_at=utcnow()))
    db.execute(update(Deliverable).where(Deliverable.id == deliverable_id).values(state="queued"))
    db.commit()
    deliver()
    assert upstream.requests_to("/hook") == []  # an email still queued: not finished
    db.execute(update(Deliverable).where(Deliverable.id == deliverable_id).values(state="sent"))
    db.commit()
    deliver()
    deliver()
    [body] = received(upstream, hook["secret"])
    assert body["type"] == "campaign.sent"
    assert body["data"] == {
        "campaign": {"id": campaign_id, "title": "Spring", "sending_state": "sent", "halt_reason": None}
    }


def test_a_dead_workers_events_go_back_to_the_queue(
    client: TestClient,
    api_user: ApiUser,
    upstream: Upstream,
    deliver: Any,
    session_factory: sessionmaker[Session],
    clock: TimeMachineFixture,
) -> None:
    upstream.serve("/hook", "", 204)
    hook = create_hook(client, api_user, upstream.url("/hook"), ["contact.subscribed"])
    create_contact(client, api_user, "ann@example.com", lists=[create_list(client, api_user)["id"]])
    with transaction(session_factory) as session:
        [claimed] = claim_events(session, utcnow(), 10, timedelta(seconds=60))  # and then the worker died
    assert deliver() == 0  # leased
    clock.shift(timedelta(seconds=61))
    with transaction(session_factory) as session:
        assert take_back_stale(session, utcnow()) == 1
    assert deliver() == 1
    [body] = received(upstream, hook["secret"])
    assert upstream.requests_to("/hook")[0].headers["webhook-id"] == f"msg_{claimed.id}"
    assert body["type"] == "contact.subscribed"


def test_deleting_a_webhook_drops_its_undelivered_events(
    client: TestClient, api_user: ApiUser, upstream: Upstream, deliver: Any
) -> None:
    upstream.serve("/hook", "", 204)
    hook = create_hook(client, api_user, upstream.url("/hook"), ["contact.subscribed"])
    create_contact(client, api_user, "ann@example.com", lists=[create_list(client, api_user)["id"]])
    assert client.delete(f"/webhooks/{hook['id']}", headers=api_user.headers).status_code == 200
    assert deliver() == 0 and upstream.requests_to("/hook") == []


def test_a_private_address_is_refused_unless_allowed(
    client: TestClient,
    api_user: ApiUser,
    upstream: Upstream,
    settings: Settings,
    session_factory: Any,
    db: Session,
) -> None:
    upstream.serve("/hook", "", 204)
    create_hook(client, api_user, upstream.url("/hook"), ["contact.subscribed"])
    create_contact(client, api_user, "ann@example.com", lists=[create_list(client, api_user)["id"]])

    async def main() -> int:
        job = EventDelivery(settings, session_factory)  # outbound_allow_private off, as in production
        try:
            return await job.drain()
        finally:
            await job.aclose()

    assert asyncio.run(main()) == 1
    assert upstream.requests_to("/hook") == []
    db.expire_all()
    assert db.scalars(select(WebhookEvent.state)).all() == ["failed"]


def test_the_openapi_document_describes_every_event(client: TestClient) -> None:
    document = yaml.safe_load(client.get("/openapi.yaml").text)
    assert sorted(document["webhooks"]) == sorted(ALL_EVENTS)
    for described in document["webhooks"].values():
        operation = described["post"]
        assert [p["name"] for p in operation["parameters"]] == [
            "webhook-id",
            "webhook-timestamp",
            "webhook-signature",
        ]
        assert operation["x-tidings-extension"] is True
        ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        assert ref.rsplit("/", 1)[1] in document["components"]["schemas"]
