"""Pause, resume, cancel and unschedule (POST /campaigns/{id}/...): the transitions and their 409s, what
a send worker does with a held campaign (nothing claimed; claimed emails not started go back to the
queue), exactly once across a pause and a resume, the cancelled count, automation emails, and the
events the account's webhooks hear."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker
from time_machine import TimeMachineFixture

from app.kit.time import utcnow
from app.mail.campaigns.campaign_control_service import cancel_returned, controlled_campaign, pause_campaign
from app.mail.sending.holds import HeldCampaigns
from app.models import Deliverable, DeliverableState, WebhookEvent
from tests.conftest import ApiUser
from tests.factories import create_automation, create_campaign
from tests.mail.sending.conftest import Sender, SmtpSink, campaign_with_list

READERS = [f"reader{n}@example.com" for n in range(10)]


def control(client: TestClient, user: ApiUser, campaign_id: int, verb: str) -> Any:
    return client.post(f"/campaigns/{campaign_id}/{verb}", headers=user.headers)


def state(client: TestClient, user: ApiUser, campaign_id: int) -> dict[str, Any]:
    answer = client.get(f"/campaigns/{campaign_id}", headers=user.headers)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def states(db: Session, campaign_id: int) -> dict[str, int]:
    return dict(
        db.execute(
            select(Deliverable.state, func.count())
            .where(Deliverable.campaign_id == campaign_id)
            .group_by(Deliverable.state)
        ).all()
    )


def started(client: TestClient, user: ApiUser, sender: Sender) -> int:
    """A campaign to READERS, asked to send and fanned out (nothing sent yet)."""
    campaign_id = campaign_with_list(client, user.headers, READERS)
    assert control(client, user, campaign_id, "send").status_code == 200
    assert sender.worker.fan_out() == [campaign_id]
    return campaign_id


@pytest.fixture
def one_at_a_time(sender: Sender) -> Iterator[Sender]:
    """The sender sending one email at a time, reading the held campaigns before each."""
    sender.worker.config = replace(sender.worker.config, concurrency=1)
    sender.worker.holds = HeldCampaigns(sender.worker.held, max_age=0)
    yield sender


def test_a_draft_cannot_be_paused_resumed_cancelled_or_unscheduled(
    client: TestClient, api_user: ApiUser
) -> None:
    draft = create_campaign(client, api_user)
    for verb, says in [
        ("pause", "A draft campaign cannot be paused."),
        ("resume", "A draft campaign cannot be resumed: only a paused one."),
        ("cancel", "A draft campaign cannot be cancelled."),
        ("unschedule", "Campaign is not scheduled."),
    ]:
        answer = control(client, api_user, draft["id"], verb)
        assert answer.status_code == 409, (verb, answer.text)
        assert answer.json()["message"] == says
    assert state(client, api_user, draft["id"])["sending_state"] == "draft"


def test_another_accounts_campaign_is_not_found(
    client: TestClient, api_user: ApiUser, make_user: Any
) -> None:
    other = make_user("other@example.com")
    campaign_id = campaign_with_list(
        client, other.headers, READERS[:1], scheduled_at="2099-01-01T00:00:00Z", timezone="UTC"
    )
    for verb in ("pause", "resume", "cancel", "unschedule"):
        assert control(client, api_user, campaign_id, verb).status_code == 404
        assert control(client, api_user, 999_999, verb).status_code == 404
    assert state(client, other, campaign_id)["sending_state"] == "queued"


def test_a_paused_scheduled_campaign_is_not_started_until_resumed(
    clock: TimeMachineFixture, client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink
) -> None:
    clock.move_to("2031-03-01T10:00:00Z", tick=False)
    campaign_id = campaign_with_list(
        client, api_user.headers, READERS[:2], scheduled_at="2031-03-01T11:00:00Z", timezone="UTC"
    )
    paused = control(client, api_user, campaign_id, "pause")
    assert paused.status_code == 200, paused.text
    assert paused.json()["sending_state"] == "paused"
    assert control(client, api_user, campaign_id, "pause").status_code == 409
    clock.move_to("2031-03-01T12:00:00Z", tick=False)
    assert sender.drain() == 0
    assert control(client, api_user, campaign_id, "resume").json()["sending_state"] == "queued"
    assert sender.drain() == 2
    assert sorted(r.recipients[0] for r in smtp_sink.received) == READERS[:2]
    assert control(client, api_user, campaign_id, "unschedule").status_code == 409  # started


def test_unschedule_makes_a_paused_scheduled_campaign_a_draft_again(
    clock: TimeMachineFixture, client: TestClient, api_user: ApiUser, sender: Sender
) -> None:
    clock.move_to("2031-03-01T10:00:00Z", tick=False)
    campaign_id = campaign_with_list(
        client, api_user.headers, READERS[:1], scheduled_at="2031-03-01T11:00:00Z", timezone="UTC"
    )
    control(client, api_user, campaign_id, "pause")
    draft = control(client, api_user, campaign_id, "unschedule")
    assert draft.status_code == 200, draft.text
    assert draft.json()["sending_state"] == "draft"
    assert draft.json()["scheduled_at"] is None
    clock.move_to("2031-03-02T00:00:00Z", tick=False)
    assert sender.drain() == 0
    # A draft again: it can be sent like any draft, and then it is not paused.
    assert control(client, api_user, campaign_id, "send").status_code == 200
    assert sender.drain() == 1


def test_a_cancelled_scheduled_campaign_never_starts_and_cannot_be_edited(
    clock: TimeMachineFixture, client: TestClient, api_user: ApiUser, sender: Sender
) -> None:
    clock.move_to("2031-03-01T10:00:00Z", tick=False)
    campaign_id = campaign_with_list(
        client, api_user.headers, READERS[:2], scheduled_at="2031-03-01T11:00:00Z", timezone="UTC"
    )
    cancelled = control(client, api_user, campaign_id, "cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["sending_state"] == "cancelled"
    clock.move_to("2031-03-02T00:00:00Z", tick=False)
    assert sender.drain() == 0
    for verb in ("pause", "resume", "cancel", "unschedule", "send"):
        assert control(client, api_user, campaign_id, verb).status_code == 409, verb
    patched = client.patch(f"/campaigns/{campaign_id}", json={"title": "Again"}, headers=api_user.headers)
    assert patched.status_code == 409


def test_pause_and_resume_send_every_recipient_exactly_once(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink, db: Session
) -> None:
    campaign_id = started(client, api_user, sender)
    paused = control(client, api_user, campaign_id, "pause").json()
    assert paused["sending_state"] == "paused"
    assert paused["pending_count"] == len(READERS)
    assert sender.step() == 0  # nothing of it is claimed
    assert states(db, campaign_id) == {"queued": len(READERS)}
    assert control(client, api_user, campaign_id, "resume").json()["sending_state"] == "sending"
    assert control(client, api_user, campaign_id, "resume").status_code == 409
    assert sender.drain() == len(READERS)
    assert Counter(r.recipients[0] for r in smtp_sink.received) == Counter(READERS)
    assert state(client, api_user, campaign_id)["sending_state"] == "sent"
    assert control(client, api_user, campaign_id, "pause").status_code == 409


def test_emails_claimed_before_the_pause_are_not_started_after_it(
    client: TestClient,
    api_user: ApiUser,
    one_at_a_time: Sender,
    smtp_sink: SmtpSink,
    session_factory: sessionmaker[Session],
    db: Session,
) -> None:
    """The pause commits while a worker holds a claimed batch: the emails it has not started go back to
    the queue as never claimed, and the resume sends exactly them."""
    sender = one_at_a_time
    campaign_id = started(client, api_user, sender)
    transport_send = sender.transport.send

    async def send_then_pause(
        envelope_from: str, envelope_to: str, message: bytes, sending_domain: str = "", admit: Any = None
    ) -> None:
        await transport_send(envelope_from, envelope_to, message, sending_domain, admit)
        if len(smtp_sink.received) == 3:
            # The tests' sessions share one connection: nothing else may use it meanwhile.
            await sender.worker.recorder.flush()
            with session_factory() as session:
                campaign = controlled_campaign(session, api_user.account_id, campaign_id)
                pause_campaign(session, campaign, utcnow())
                session.commit()

    sender.transport.send = send_then_pause  # type: ignore[method-assign]
    assert sender.step() == len(READERS)  # claimed the lot
    assert len(smtp_sink.received) == 3
    assert states(db, campaign_id) == {"sent": 3, "queued": 7}
    assert set(db.scalars(select(Deliverable.attempts).where(Deliverable.state == "queued"))) == {0}
    assert state(client, api_user, campaign_id)["sending_state"] == "paused"
    sender.transport.send = transport_send  # type: ignore[method-assign]
    control(client, api_user, campaign_id, "resume")
    assert sender.drain() == 7
    assert Counter(r.recipients[0] for r in smtp_sink.received) == Counter(READERS)


def test_cancel_counts_what_was_not_sent_and_tells_the_webhooks(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink, db: Session
) -> None:
    hook = client.post(
        "/webhooks",
        json={
            "url": "https://hooks.example.com/t",
            "events": ["campaign.paused", "campaign.resumed", "campaign.cancelled", "campaign.sent"],
        },
        headers=api_user.headers,
    )
    assert hook.status_code == 201, hook.text
    campaign_id = started(client, api_user, sender)
    db.execute(
        update(Deliverable)
        .where(
            Deliverable.id.in_(select(Deliverable.id).where(Deliverable.campaign_id == campaign_id).limit(4))
        )
        .values(state=DeliverableState.SENT, sent_at=utcnow())
    )
    db.commit()
    control(client, api_user, campaign_id, "pause")
    control(client, api_user, campaign_id, "resume")
    cancelled = control(client, api_user, campaign_id, "cancel").json()
    assert cancelled["sending_state"] == "cancelled"
    assert (cancelled["sent_count"], cancelled["cancelled_count"], cancelled["pending_count"]) == (4, 6, 0)
    assert sender.drain() == 0
    stats = client.get(f"/campaigns/{campaign_id}/stats", headers=api_user.headers).json()
    assert (stats["sent_count"], stats["cancelled_count"], stats["sending_state"]) == (4, 6, "cancelled")
    bodies = [orjson.loads(body) for body in db.scalars(select(WebhookEvent.body).order_by(WebhookEvent.id))]
    assert [body["type"] for body in bodies] == ["campaign.paused", "campaign.resumed", "campaign.cancelled"]
    assert bodies[2]["data"] == {
        "campaign": {
            "id": campaign_id,
            "title": "Hello",
            "sending_state": "cancelled",
            "pending_count": 0,
            "cancelled_count": 6,
        }
    }


def test_an_email_of_a_cancelled_campaign_that_comes_back_to_the_queue_is_cancelled(
    client: TestClient, api_user: ApiUser, sender: Sender, db: Session
) -> None:
    """An email on the wire at the cancel whose relay answered 4xx (or whose worker died) is queued
    again: the lease sweep cancels it, and the claim never takes it meanwhile."""
    campaign_id = started(client, api_user, sender)
    in_flight = db.scalars(
        select(Deliverable.id).where(Deliverable.campaign_id == campaign_id).limit(2)
    ).all()
    db.execute(
        update(Deliverable).where(Deliverable.id.in_(in_flight)).values(state=DeliverableState.SENDING)
    )
    db.commit()
    assert control(client, api_user, campaign_id, "cancel").json()["pending_count"] == 2
    db.execute(update(Deliverable).where(Deliverable.id.in_(in_flight)).values(state=DeliverableState.QUEUED))
    db.commit()
    assert sender.step() == 0
    assert cancel_returned(db, utcnow() + timedelta(seconds=1)) == 2
    db.commit()
    assert states(db, campaign_id) == {"cancelled": len(READERS)}


def test_an_automation_email_pauses_and_cancels_by_its_campaign_id(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink, db: Session
) -> None:
    list_id = client.post("/lists", json={"name": "Drip"}, headers=api_user.headers).json()["id"]
    automation = create_automation(
        client, api_user, trigger_type="apply_list", trigger_list_id=list_id, active=True
    )
    item = client.post(
        f"/automations/{automation['id']}/emails",
        json={"subject": "Welcome", "html": "<p>Hi</p>", "from_name": "T", "from_email": "news@example.com"},
        headers=api_user.headers,
    )
    assert item.status_code == 201, item.text
    campaign_id = item.json()["campaign_id"]
    assert control(client, api_user, campaign_id, "pause").json()["sending_state"] == "paused"
    assert control(client, api_user, campaign_id, "unschedule").status_code == 404
    for address in READERS[:2]:
        client.post("/contacts", json={"email": address, "lists": [list_id]}, headers=api_user.headers)
    sender.drain()
    assert smtp_sink.received == []
    assert states(db, campaign_id) == {"queued": 2}
    assert control(client, api_user, campaign_id, "cancel").json()["cancelled_count"] == 2
    sender.drain()
    assert smtp_sink.received == []


def test_the_pause_does_not_wait_for_or_disturb_other_campaigns(
    client: TestClient, api_user: ApiUser, sender: Sender, smtp_sink: SmtpSink
) -> None:
    paused_id = started(client, api_user, sender)
    other_id = campaign_with_list(client, api_user.headers, ["other@example.com"])
    control(client, api_user, other_id, "send")
    control(client, api_user, paused_id, "pause")
    assert sender.drain() == 1
    assert [r.recipients[0] for r in smtp_sink.received] == ["other@example.com"]
    assert state(client, api_user, paused_id)["sending_state"] == "paused"


def test_the_claim_reads_held_campaigns_at_most_max_age_ago() -> None:
    reads: list[int] = []
    now = [0.0]

    def read() -> frozenset[int]:
        reads.append(1)
        return frozenset({7})

    holds = HeldCampaigns(read, max_age=0.1, clock=lambda: now[0])

    async def main() -> None:
        assert await holds.current() == {7}
        now[0] = 0.05
        assert await holds.current() == {7}
        assert len(reads) == 1
        now[0] = 0.2
        await asyncio.gather(holds.current(), holds.current())
        assert len(reads) == 2  # one reading shared by concurrent callers

    asyncio.run(main())


def test_the_recorders_round_trip_reads_the_held_campaigns_along_once_they_are_nearly_due() -> None:
    reads: list[str] = []
    now = [0.0]

    def read(where: str, held: int) -> Callable[[], frozenset[int]]:
        def reading() -> frozenset[int]:
            reads.append(where)
            return frozenset({held})

        return reading

    holds = HeldCampaigns(read("hop", 7), max_age=0.1, clock=lambda: now[0])

    async def main() -> None:
        assert await holds.current() == {7}
        now[0] = 0.05
        holds.read_along(read("along", 8))  # the reading is fresh: nothing read
        now[0] = 0.09
        holds.read_along(read("along", 8))
        now[0] = 0.15
        assert await holds.current() == {8}  # read along at 0.09: no hop of its own
        now[0] = 0.2
        assert await holds.current() == {7}
        assert reads == ["hop", "along", "hop"]

    asyncio.run(main())
