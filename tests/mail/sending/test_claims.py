"""Who owns a claimed row: results are written only under the claim's own lease, an email whose lease
is running out is not started, paused automations keep their rows queued, and custom field values
are loaded for the templates that name them."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event, select
from sqlalchemy.orm import Session

from app.kit.time import utcnow
from app.mail.sending import queue
from app.mail.sending.queue import fan_out_due, release_expired_leases
from app.mail.sending.worker import SendWorker
from app.models import Automation, Campaign, Deliverable
from tests.mail.sending.conftest import Sender, SmtpSink, campaign_with_list


def send_now(client: Any, headers: dict[str, str], campaign_id: int) -> None:
    response = client.post(f"/campaigns/{campaign_id}/send", headers=headers)
    assert response.status_code == 200, response.text


def worker_at(sender: Sender, clock: Any) -> SendWorker:
    worker = sender.worker
    return SendWorker(worker.config, worker.session_factory, worker.transport, worker.tokens, clock)


def row_of(db: Session, campaign_id: int) -> Deliverable:
    db.expire_all()
    return db.scalars(select(Deliverable).where(Deliverable.campaign_id == campaign_id)).one()


def test_a_late_worker_cannot_overwrite_a_row_claimed_again(
    client: Any, api_user: Any, db: Session, sender: Sender, smtp_sink: SmtpSink
) -> None:
    campaign_id = campaign_with_list(client, api_user.headers, ["slow@example.com"])
    send_now(client, api_user.headers, campaign_id)
    sender.worker.fan_out()
    start = utcnow()
    slow = worker_at(sender, lambda: start)
    [first] = slow.claim()
    # The slow worker stalls past its lease; the sweep takes the row back and another claims it.
    later = start + sender.worker.config.limits.lease + timedelta(seconds=1)
    with sender.worker.session_factory() as session:
        assert release_expired_leases(session, later) == 1
        session.commit()
    fast = worker_at(sender, lambda: later)
    [second] = fast.claim()
    assert second.lease_until != first.lease_until
    # The slow worker's result comes in last: it must not mark the row the other worker now holds.
    outcomes = asyncio.run(fast._send_all([second]))
    stale = [replace(outcomes[0], lease_until=first.lease_until, message_id="<stale@example.com>")]
    slow.record(stale)
    row = row_of(db, campaign_id)
    assert (row.state, row.message_id) == ("sending", None)
    fast.record(outcomes)
    row = row_of(db, campaign_id)
    assert (row.state, row.message_id) == ("sent", outcomes[0].message_id)


def test_one_group_records_the_rows_of_several_claims_each_under_its_own_lease(
    client: Any, api_user: Any, db: Session, sender: Sender
) -> None:
    # The recorder's groups mix the emails of several lanes' batches, each claimed under a lease of its
    # own, and write them in one statement: each row is still fenced by its own claim's lease.
    campaign_id = campaign_with_list(
        client, api_user.headers, ["a@example.com", "b@example.com", "c@example.com"]
    )
    send_now(client, api_user.headers, campaign_id)
    sender.worker.fan_out()
    start = utcnow()
    base = sender.worker
    one_at_a_time = replace(base.config, batch_size=1)
    [first], [second], [third] = (
        SendWorker(one_at_a_time, base.session_factory, base.transport, base.tokens, lambda at=at: at).claim()
        for at in (start, start + timedelta(seconds=1), start + timedelta(seconds=2))
    )
    assert len({first.lease_until, second.lease_until, third.lease_until}) == 3
    sent = [
        queue.Outcome(
            item.deliverable_id,
            item.campaign_id,
            item.contact_id,
            item.attempts,
            queue.SendResult.SENT,
            message_id=f"<{item.deliverable_id}@example.com>",
            lease_until=item.lease_until,
        )
        for item in (first, second, third)
    ]
    # The third row's result comes under another claim's lease (a worker that lost the row since).
    sent[2] = replace(sent[2], lease_until=first.lease_until, message_id="<stale@example.com>")
    sender.worker.record(sent)
    db.expire_all()
    rows = {
        row.id: (row.state, row.message_id)
        for row in db.scalars(select(Deliverable).where(Deliverable.campaign_id == campaign_id))
    }
    assert rows == {
        first.deliverable_id: ("sent", sent[0].message_id),
        second.deliverable_id: ("sent", sent[1].message_id),
        third.deliverable_id: ("sending", None),
    }


def test_an_email_whose_lease_is_running_out_is_left_for_the_sweep(
    client: Any, api_user: Any, db: Session, sender: Sender, smtp_sink: SmtpSink
) -> None:
    campaign_id = campaign_with_list(client, api_user.headers, ["late@example.com"])
    send_now(client, api_user.headers, campaign_id)
    sender.worker.fan_out()
    start = utcnow()
    now = [start]
    worker = worker_at(sender, lambda: now[0])
    claimed = worker.claim()
    lease = worker.config.limits.lease
    now[0] = start + lease - worker.config.lease_margin / 2  # inside the margin before the lease ends
    assert asyncio.run(worker._send_all(claimed)) == []
    assert smtp_sink.received == []
    assert row_of(db, campaign_id).state == "sending"
    now[0] = start + lease - worker.config.lease_margin * 2
    assert [o.result for o in asyncio.run(worker._send_all(claimed))] == ["sent"]


def test_rows_of_a_paused_automation_stay_queued_and_do_not_block_others(
    client: Any, api_user: Any, db: Session, sender: Sender, smtp_sink: SmtpSink
) -> None:
    paused_id = campaign_with_list(client, api_user.headers, ["p1@example.com", "p2@example.com"])
    regular_id = campaign_with_list(client, api_user.headers, ["r@example.com"])
    send_now(client, api_user.headers, paused_id)
    sender.worker.fan_out()
    automation = Automation(
        account_id=api_user.account_id, user_id=api_user.user_id, title="Drip", active=False
    )
    db.add(automation)
    db.flush()
    campaign = db.get(Campaign, paused_id)
    assert campaign is not None
    campaign.automation_id = automation.id
    db.commit()
    send_now(client, api_user.headers, regular_id)
    # Batches of one: the paused rows, older, are first in the queue and must be stepped over.
    assert worker_at_batch(sender, 1).drain() == 1
    assert [r.recipients for r in smtp_sink.received] == [["r@example.com"]]
    db.expire_all()
    states = db.scalars(select(Deliverable.state).where(Deliverable.campaign_id == paused_id)).all()
    assert states == ["queued", "queued"]
    automation.active = True
    db.commit()
    assert sender.drain() == 2


def worker_at_batch(sender: Sender, size: int) -> Any:
    worker = sender.worker
    config = replace(worker.config, batch_size=size)
    runner = SendWorker(config, worker.session_factory, worker.transport, worker.tokens)

    class Drain:
        def drain(self) -> int:
            async def go() -> int:
                try:
                    return await runner.drain()
                finally:
                    await runner.transport.close()

            return asyncio.run(go())

    return Drain()


def test_custom_fields_reach_the_emails_that_name_them(
    client: Any, api_user: Any, db: Session, sender: Sender, smtp_sink: SmtpSink
) -> None:
    list_id = client.post("/lists", json={"name": "Fields"}, headers=api_user.headers).json()["id"]
    for address, company in (("acme@example.com", "Acme"), ("none@example.com", None)):
        body: dict[str, Any] = {"email": address, "lists": [list_id]}
        if company:
            body["contact_fields"] = [{"name": "Company", "value": company}]
        assert client.post("/contacts", json=body, headers=api_user.headers).status_code in (200, 201)
    campaign = {
        "title": "Fields",
        "subject": 'News for {{ company | "you" }}',
        "html": "<p>Hello {{ COMPANY | 'friend' }}</p>",
        "from_name": "T",
        "from_email": "news@example.com",
        "lists": [list_id],
    }
    campaign_id = client.post("/campaigns", json=campaign, headers=api_user.headers).json()["id"]
    send_now(client, api_user.headers, campaign_id)
    assert sender.drain() == 2
    acme = smtp_sink.to("acme@example.com")[0]
    assert acme.message["Subject"] == "News for Acme" and "Hello Acme" in acme.part("html")
    other = smtp_sink.to("none@example.com")[0]
    assert other.message["Subject"] == "News for you" and "Hello friend" in other.part("html")


def test_a_large_fan_out_refreshes_the_planners_statistics(
    client: Any, api_user: Any, sender: Sender, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL only: ANALYZE after a fan-out, or the claim's plan sorts the whole queue each time."""
    campaign_id = campaign_with_list(client, api_user.headers, ["s1@example.com", "s2@example.com"])
    send_now(client, api_user.headers, campaign_id)
    monkeypatch.setattr(queue, "ANALYZE_AFTER_FAN_OUT", 2)
    seen: list[str] = []
    with sender.worker.session_factory() as session:
        bind = session.connection()
        event.listen(bind, "before_cursor_execute", lambda *args: seen.append(args[2]))
        assert list(fan_out_due(session, utcnow())) == [campaign_id]
        session.rollback()
    analyzed = any(statement.startswith("ANALYZE deliverables") for statement in seen)
    assert analyzed == (bind.dialect.name == "postgresql")
