"""The send queue against a real SMTP server: retries, bounces, leases, pacing, the daily cap, the
bounce-rate stop, and rows whose contact went away."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker
from time_machine import TimeMachineFixture

from app.config import Settings
from app.kit.time import utcnow
from app.mail.sending.queue import MAX_ATTEMPTS, BounceRule, release_expired_leases
from app.mail.sending.tokens import MailTokens
from app.mail.sending.transport import SmtpTransport
from app.mail.sending.worker import SendConfig, SendWorker
from app.models import Account, Campaign, Contact, Deliverable
from tests.conftest import NOON
from tests.mail.sending.conftest import Sender, SmtpSink, campaign_with_list
from tests.processes import free_port


def send_now(client: Any, headers: dict[str, str], campaign_id: int) -> None:
    response = client.post(f"/campaigns/{campaign_id}/send", headers=headers)
    assert response.status_code == 200, response.text


def rows(db: Session, campaign_id: int) -> dict[str, Deliverable]:
    db.expire_all()
    found = db.scalars(select(Deliverable).where(Deliverable.campaign_id == campaign_id)).all()
    emails = {contact_id: email for contact_id, email in db.execute(select(Contact.id, Contact.email))}
    return {emails[row.contact_id]: row for row in found}


def worker_at(sender: Sender, moment: datetime, **config: Any) -> SendWorker:
    """The same worker, seeing the clock at `moment` and with some settings changed."""
    worker = sender.worker
    return SendWorker(
        replace(worker.config, **config),
        worker.session_factory,
        worker.transport,
        worker.tokens,
        lambda: moment,
    )


def run(worker: SendWorker) -> int:
    async def go() -> int:
        try:
            return await worker.drain()
        finally:
            await worker.transport.close()

    return asyncio.run(go())


def test_temporary_failure_is_retried_later_and_sent_once(
    client: Any, api_user: Any, db: Session, sender: Sender, smtp_sink: SmtpSink
) -> None:
    campaign_id = campaign_with_list(client, api_user.headers, ["ok@example.com", "later@example.com"])
    send_now(client, api_user.headers, campaign_id)
    smtp_sink.refuse["later@example.com"] = "451 4.7.1 Greylisted, try again later"
    started = utcnow()
    assert sender.drain() == 2
    state = rows(db, campaign_id)
    assert state["ok@example.com"].state == "sent"
    retry = state["later@example.com"]
    assert (retry.state, retry.attempts, retry.sent_at) == ("queued", 1, None)
    assert "451" in (retry.error or "")
    assert retry.send_after is not None
    wait = retry.send_after.replace(tzinfo=UTC) - started
    assert timedelta(seconds=50) < wait < timedelta(minutes=2)
    # Not due yet: nothing is sent again.
    assert sender.drain() == 0
    smtp_sink.refuse.clear()
    assert run(worker_at(sender, utcnow() + timedelta(minutes=2))) == 1
    assert rows(db, campaign_id)["later@example.com"].state == "sent"
    assert len(smtp_sink.to("later@example.com")) == 1
    assert len(smtp_sink.to("ok@example.com")) == 1


def test_an_unreachable_relay_shows_in_the_campaigns_view(
    client: Any, api_user: Any, settings: Settings, session_factory: sessionmaker[Session]
) -> None:
    """The API said `sending` while only the log said "connection refused": the campaign's view carries
    its last delivery error, and when it happened."""
    campaign_id = campaign_with_list(client, api_user.headers, ["wait@example.com"])
    view = client.get(f"/campaigns/{campaign_id}", headers=api_user.headers).json()
    assert (view["last_delivery_error"], view["last_delivery_error_at"]) == (None, None)
    send_now(client, api_user.headers, campaign_id)
    nobody = SmtpTransport(f"smtp://127.0.0.1:{free_port()}", size=1)  # a port no relay listens on
    tokens = MailTokens(settings.resolved_secret_key)
    worker = SendWorker(SendConfig.from_settings(settings), session_factory, nobody, tokens)
    assert Sender(worker, nobody, tokens).drain() == 1
    view = client.get(f"/campaigns/{campaign_id}", headers=api_user.headers).json()
    assert view["sending_state"] == "sending" and view["pending_count"] == 1
    assert f"127.0.0.1:{nobody.port}" in view["last_delivery_error"]
    assert "refused" in view["last_delivery_error"].lower(), view["last_delivery_error"]
    assert view["last_delivery_error_at"].endswith("Z")
    listed = client.get("/campaigns", headers=api_user.headers).json()["data"]
    assert [c["last_delivery_error"] for c in listed if c["id"] == campaign_id] == [
        view["last_delivery_error"]
    ]


def test_temporary_failures_give_up_after_the_last_attempt(
    client: Any, api_user: Any, db: Session, sender: Sender, smtp_sink: SmtpSink
) -> None:
    campaign_id = campaign_with_list(client, api_user.headers, ["never@example.com"])
    send_now(client, api_user.headers, campaign_id)
    smtp_sink.refuse["never@example.com"] = "452 4.2.2 Mailbox full"
    sender.drain()
    row = rows(db, campaign_id)["never@example.com"]
    row.attempts = MAX_ATTEMPTS - 1
    row.send_after = datetime(2000, 1, 1, tzinfo=UTC)
    db.commit()
    assert sender.drain() == 1
    row = rows(db, campaign_id)["never@example.com"]
    assert row.state == "failed"
    assert (row.error or "").startswith("gave up: 452")


def test_permanent_refusal_bounces_that_recipient_only(
    client: Any, api_user: Any, db: Session, sender: Sender, smtp_sink: SmtpSink
) -> None:
    emails = ["a@example.com", "gone@example.com", "c@example.com"]
    campaign_id = campaign_with_list(client, api_user.headers, emails)
    send_now(client, api_user.headers, campaign_id)
    smtp_sink.refuse["gone@example.com"] = "550 5.1.1 No such user"
    assert sender.drain() == 3
    state = rows(db, campaign_id)
    assert [state[e].state for e in emails] == ["sent", "bounced", "sent"]
    assert state["gone@example.com"].bounced_at is not None
    contact = db.scalars(select(Contact).where(Contact.email == "gone@example.com")).one()
    assert contact.bounced_at is not None
    stats = client.get(f"/campaigns/{campaign_id}/stats", headers=api_user.headers).json()
    assert stats["bounce_count"] == 1
    # A bounced address is left out of the next campaign to the same list.
    list_id = client.get(f"/campaigns/{campaign_id}", headers=api_user.headers).json()["lists"][0]
    list_id = list_id["id"] if isinstance(list_id, dict) else list_id
    again = client.post(
        "/campaigns",
        json={
            "title": "Again",
            "subject": "Again",
            "html": "<p>again</p>",
            "from_name": "T",
            "from_email": "news@example.com",
            "lists": [list_id],
        },
        headers=api_user.headers,
    ).json()["id"]
    send_now(client, api_user.headers, again)
    assert sender.drain() == 2
    assert sorted(rows(db, again)) == ["a@example.com", "c@example.com"]


def test_expired_lease_goes_back_to_the_queue(
    client: Any, api_user: Any, db: Session, sender: Sender, smtp_sink: SmtpSink
) -> None:
    campaign_id = campaign_with_list(client, api_user.headers, ["crash@example.com"])
    send_now(client, api_user.headers, campaign_id)
    sender.worker.fan_out()
    claimed = sender.worker.claim()  # a worker claims, then dies before sending
    assert [c.email for c in claimed] == ["crash@example.com"]
    assert rows(db, campaign_id)["crash@example.com"].state == "sending"
    assert sender.drain() == 0  # leased: nobody else takes it
    with sender.worker.session_factory() as session:
        assert release_expired_leases(session, utcnow()) == 0
        later = utcnow() + sender.worker.config.limits.lease + timedelta(seconds=1)
        assert release_expired_leases(session, later) == 1
        session.commit()
    assert run(worker_at(sender, later)) == 1
    assert len(smtp_sink.to("crash@example.com")) == 1
    assert rows(db, campaign_id)["crash@example.com"].attempts == 2


def test_pacing_spreads_sends_over_time(
    client: Any, api_user: Any, db: Session, sender: Sender, smtp_sink: SmtpSink
) -> None:
    emails = [f"p{n}@example.com" for n in range(8)]
    campaign_id = campaign_with_list(client, api_user.headers, emails)
    send_now(client, api_user.headers, campaign_id)
    moment = utcnow()
    limits = replace(sender.worker.config.limits, send_rate=2.0)
    # Two a second: the slots now, +0.5 s and +1 s go at once; the rest wait for theirs.
    assert run(worker_at(sender, moment, limits=limits)) == 3
    state = rows(db, campaign_id)
    waiting = sorted(r.send_after for r in state.values() if r.state == "queued" and r.send_after)
    assert len(waiting) == 5
    gaps = {round((b - a).total_seconds(), 3) for a, b in itertools.pairwise(waiting)}
    assert gaps == {0.5}
    assert len(smtp_sink.received) == 3
    # However long the wait, at most a second's worth (plus one) goes out at once.
    assert run(worker_at(sender, moment + timedelta(seconds=10), limits=limits)) == 3
    assert run(worker_at(sender, moment + timedelta(seconds=20), limits=limits)) == 2
    assert len(smtp_sink.received) == 8


@pytest.mark.usefixtures("clock")
def test_daily_cap_holds_the_rest_until_the_next_day(
    client: Any, api_user: Any, db: Session, sender: Sender, smtp_sink: SmtpSink
) -> None:
    emails = [f"d{n}@example.com" for n in range(5)]
    campaign_id = campaign_with_list(client, api_user.headers, emails)
    send_now(client, api_user.headers, campaign_id)
    account = db.get(Account, api_user.account_id)
    assert account is not None
    account.daily_send_limit = 2
    db.commit()
    moment = utcnow()
    assert run(worker_at(sender, moment)) == 2
    state = rows(db, campaign_id)
    held = [r for r in state.values() if r.state == "queued"]
    assert len(held) == 3
    tomorrow = datetime.combine(NOON.date() + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
    assert {r.send_after for r in held} == {tomorrow}
    assert run(worker_at(sender, moment + timedelta(hours=1))) == 0
    assert run(worker_at(sender, tomorrow + timedelta(minutes=1))) == 2
    assert len(smtp_sink.received) == 4


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


@pytest.mark.parametrize(
    ("zone", "first", "same_day", "next_day"),
    [
        # Los Angeles in January is UTC-8: UTC's midnight falls inside its day, which ends at 08:00 UTC.
        (
            "America/Los_Angeles",
            "2030-01-14T23:59:50Z",
            ["2030-01-15T00:00:10Z", "2030-01-15T07:59:59Z"],
            "2030-01-15T08:00:00Z",
        ),
        # Tokyo is UTC+9: its day ends at 15:00 UTC.
        ("Asia/Tokyo", "2030-01-14T12:00:00Z", ["2030-01-14T14:59:59Z"], "2030-01-14T15:00:00Z"),
        # The last second of a month.
        ("UTC", "2030-01-31T20:00:00Z", ["2030-01-31T23:59:59Z"], "2030-02-01T00:00:00Z"),
    ],
)
def test_the_daily_cap_counts_the_days_of_the_accounts_time_zone(
    client: Any,
    make_user: Any,
    db: Session,
    sender: Sender,
    smtp_sink: SmtpSink,
    clock: TimeMachineFixture,
    zone: str,
    first: str,
    same_day: list[str],
    next_day: str,
) -> None:
    clock.move_to(at(first) - timedelta(minutes=5))
    user = make_user(timezone=zone, daily_send_limit=2)
    campaign_id = campaign_with_list(client, user.headers, [f"z{n}@example.com" for n in range(5)])
    send_now(client, user.headers, campaign_id)
    assert run(worker_at(sender, at(first))) == 2
    held = [r for r in rows(db, campaign_id).values() if r.state == "queued"]
    assert {r.send_after for r in held} == {at(next_day)}
    # Made due at once, the held rows still wait until the account's day is over.
    for row in held:
        row.send_after = at(first)
    db.commit()
    for moment in same_day:
        assert run(worker_at(sender, at(moment))) == 0
    assert run(worker_at(sender, at(next_day))) == 2
    assert len(smtp_sink.received) == 4
    account = db.get_one(Account, user.account_id)
    db.refresh(account)
    assert (account.sent_day, account.sent_today) == (at(next_day).astimezone(ZoneInfo(zone)).date(), 2)


def test_contacts_that_left_after_fan_out_are_not_sent(
    client: Any, api_user: Any, db: Session, sender: Sender, smtp_sink: SmtpSink
) -> None:
    emails = ["stay@example.com", "leave@example.com", "deleted@example.com"]
    campaign_id = campaign_with_list(client, api_user.headers, emails)
    send_now(client, api_user.headers, campaign_id)
    sender.worker.fan_out()
    response = client.patch("/unsubscribe", json={"email": "leave@example.com"}, headers=api_user.headers)
    assert response.status_code == 200
    deleted = db.scalars(select(Contact.id).where(Contact.email == "deleted@example.com")).one()
    assert client.delete(f"/contacts/{deleted}", headers=api_user.headers).status_code == 200
    sender.drain()
    assert [r.recipients for r in smtp_sink.received] == [["stay@example.com"]]
    state = rows(db, campaign_id)
    assert state["leave@example.com"].state == "cancelled"
    assert state["deleted@example.com"].state == "cancelled"


def test_campaign_stops_by_itself_when_too_many_bounce(
    client: Any, api_user: Any, db: Session, sender: Sender, smtp_sink: SmtpSink
) -> None:
    emails = [f"b{n:02d}@example.com" for n in range(20)]
    campaign_id = campaign_with_list(client, api_user.headers, emails)
    send_now(client, api_user.headers, campaign_id)
    for address in emails[:5]:
        smtp_sink.refuse[address] = "550 5.1.1 No such user"
    worker = worker_at(sender, utcnow(), batch_size=8, bounce_rule=BounceRule(rate=0.2, min_sent=5))
    run(worker)
    db.expire_all()
    campaign = db.get(Campaign, campaign_id)
    assert campaign is not None and campaign.halted_at is not None
    assert "bounced" in (campaign.halt_reason or "")
    state = rows(db, campaign_id)
    assert sum(r.state == "bounced" for r in state.values()) == 5
    cancelled = [r for r in state.values() if r.state == "cancelled"]
    assert len(cancelled) == 12  # the first batch of 8 went out; the rest never will
    assert len(smtp_sink.received) == 3


def test_sent_at_is_set_when_sending_starts_and_edits_are_refused_after(
    client: Any, api_user: Any, db: Session, sender: Sender
) -> None:
    campaign_id = campaign_with_list(client, api_user.headers, ["x@example.com"])
    send_now(client, api_user.headers, campaign_id)
    assert client.get(f"/campaigns/{campaign_id}", headers=api_user.headers).json()["sent_at"] is None
    assert sender.worker.fan_out() == [campaign_id]
    assert client.get(f"/campaigns/{campaign_id}", headers=api_user.headers).json()["sent_at"] is not None
    response = client.patch(f"/campaigns/{campaign_id}", json={"title": "Late"}, headers=api_user.headers)
    assert response.status_code == 409
    assert client.delete(f"/campaigns/{campaign_id}", headers=api_user.headers).status_code == 409
    # A second fan-out finds nothing: each recipient is queued once.
    assert sender.worker.fan_out() == []
    assert len(rows(db, campaign_id)) == 1


def test_scheduled_campaign_waits_for_its_time(client: Any, api_user: Any, sender: Sender) -> None:
    later = (utcnow() + timedelta(hours=2)).replace(microsecond=0, tzinfo=None).isoformat()
    campaign_id = campaign_with_list(client, api_user.headers, ["w@example.com"], scheduled_at=later)
    assert sender.worker.fan_out() == []
    assert worker_at(sender, utcnow() + timedelta(hours=3)).fan_out() == [campaign_id]


def test_stats_are_right_while_a_campaign_is_still_sending(
    client: Any, api_user: Any, sender: Sender, smtp_sink: SmtpSink
) -> None:
    emails = [f"s{n}@example.com" for n in range(5)]
    campaign_id = campaign_with_list(client, api_user.headers, emails)
    send_now(client, api_user.headers, campaign_id)
    smtp_sink.refuse["s4@example.com"] = "550 5.1.1 No such user"
    worker = worker_at(sender, utcnow(), batch_size=2)
    worker.fan_out()

    async def one_batch() -> int:
        try:
            return await worker.run_once()
        finally:
            await worker.transport.close()

    assert asyncio.run(one_batch()) == 2
    stats = client.get(f"/campaigns/{campaign_id}/stats", headers=api_user.headers).json()
    assert (stats["sent_count"], stats["bounce_count"], stats["open_rate"]) == (2, 0, 0.0)
    run(worker)
    stats = client.get(f"/campaigns/{campaign_id}/stats", headers=api_user.headers).json()
    assert (stats["sent_count"], stats["bounce_count"]) == (4, 1)
