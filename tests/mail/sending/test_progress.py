"""Where a campaign's sending stands: its wire and stats (`sending_state` and totals, beyond SendFox)
through a real send to the loopback SMTP server, and the worker's log lines (start, each tenth or
minute, finish) under a clock the test owns."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.kit.time import utcnow
from app.mail.sending.worker import SendWorker
from app.models import Campaign, Contact
from tests.mail.sending.conftest import Sender, SmtpSink, campaign_with_list

TOTALS = (
    "sending_state",
    "recipients_total",
    "pending_count",
    "sent_count",
    "failed_count",
    "cancelled_count",
)
REFUSED = "550 5.1.1 no such user"


def totals(body: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(body[key] for key in TOTALS)


def campaign(client: Any, headers: dict[str, str], campaign_id: int) -> dict[str, Any]:
    response = client.get(f"/campaigns/{campaign_id}", headers=headers)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def contact_id(db: Session, email: str) -> int:
    found = db.scalar(select(Contact.id).where(Contact.email == email))
    assert found is not None
    return found


def test_the_wire_and_stats_show_where_sending_stands(
    client: Any, api_user: Any, db: Session, sender: Sender, smtp_sink: SmtpSink
) -> None:
    headers = api_user.headers
    emails = ["ann@example.com", "bob@example.com", "cara@example.com", "dora@example.com"]
    smtp_sink.refuse["dora@example.com"] = REFUSED
    campaign_id = campaign_with_list(client, headers, emails)
    assert totals(campaign(client, headers, campaign_id)) == ("draft", 0, 0, 0, 0, 0)

    sent = client.post(f"/campaigns/{campaign_id}/send", headers=headers)
    assert totals(sent.json()) == ("queued", 0, 0, 0, 0, 0)
    assert sender.worker.fan_out() == [campaign_id]
    assert totals(campaign(client, headers, campaign_id)) == ("sending", 4, 4, 0, 0, 0)
    # A contact deleted meanwhile: its email is cancelled.
    deleted = client.delete(f"/contacts/{contact_id(db, 'cara@example.com')}", headers=headers)
    assert deleted.status_code == 200, deleted.text
    assert totals(campaign(client, headers, campaign_id)) == ("sending", 4, 3, 0, 0, 1)

    assert sender.drain() == 3
    done = ("sent", 4, 0, 2, 1, 1)
    assert totals(campaign(client, headers, campaign_id)) == done
    stats = client.get(f"/campaigns/{campaign_id}/stats", headers=headers).json()
    assert totals(stats) == done
    assert stats["bounce_count"] == 1  # the refused recipient, also counted as a bounce
    listed = client.get("/campaigns", headers=headers).json()["data"]
    assert [totals(c) for c in listed] == [done]


def test_a_halted_campaign_and_one_without_recipients(
    client: Any, api_user: Any, db: Session, sender: Sender
) -> None:
    headers = api_user.headers
    halted = campaign_with_list(client, headers, ["ann@example.com"])
    client.post(f"/campaigns/{halted}/send", headers=headers)
    sender.worker.fan_out()
    db.execute(update(Campaign).where(Campaign.id == halted).values(halted_at=utcnow()))
    db.commit()
    assert totals(campaign(client, headers, halted)) == ("halted", 1, 1, 0, 0, 0)

    nobody = campaign_with_list(client, headers, [])
    client.post(f"/campaigns/{nobody}/send", headers=headers)
    assert sender.worker.fan_out() == [nobody]
    assert totals(campaign(client, headers, nobody)) == ("sent", 0, 0, 0, 0, 0)


# --- the worker's log ---------------------------------------------------------------------------


class Clock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


def stepping_worker(sender: Sender, clock: Clock) -> SendWorker:
    """The test's worker one email a batch, on the test's clock."""
    worker = sender.worker
    config = replace(worker.config, batch_size=1, concurrency=1)
    return SendWorker(config, worker.session_factory, worker.transport, worker.tokens, clock)


def step(worker: SendWorker) -> int:
    async def go() -> int:
        try:
            return await worker.run_once()
        finally:
            await worker.transport.close()

    return asyncio.run(go())


def progress_lines(caplog: pytest.LogCaptureFixture, campaign_id: int) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "tidings.sending" and r.getMessage().startswith(f"campaign {campaign_id}")
    ]


def started_campaign(client: Any, headers: dict[str, str], count: int, clock: Clock) -> int:
    campaign_id = campaign_with_list(client, headers, [f"reader{n}@example.com" for n in range(count)])
    assert client.post(f"/campaigns/{campaign_id}/send", headers=headers).status_code == 200
    clock.now = utcnow() + timedelta(seconds=5)
    return campaign_id


def test_the_worker_logs_each_tenth_then_the_finish_with_count_rate_and_failures(
    client: Any, api_user: Any, sender: Sender, smtp_sink: SmtpSink, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tidings.sending")
    smtp_sink.refuse["reader7@example.com"] = REFUSED
    clock = Clock(utcnow())
    campaign_id = started_campaign(client, api_user.headers, 30, clock)
    worker = stepping_worker(sender, clock)
    assert worker.fan_out() == [campaign_id]
    start = clock.now
    for n in range(1, 31):
        clock.now = start + timedelta(seconds=n)  # an email a second: a tenth every 3 s, never a minute
        assert step(worker) == 1
    c = f"campaign {campaign_id}"
    assert progress_lines(caplog, campaign_id) == [
        f"{c} started sending: 30 emails queued",
        *[
            f"{c}: {done} of 30 emails done ({done * 100 // 30}%), 1.0 emails/s, {int(done > 7)} failed"
            for done in range(3, 30, 3)
        ],
        f"{c} finished: 29 sent, 1 failed in 30.0 s (1.0 emails/s)",
    ]
    # Finished: no more lines, and no database check for it when idle.
    assert step(worker) == 0
    assert len(progress_lines(caplog, campaign_id)) == 11


def test_a_slow_campaign_gets_a_line_every_minute(
    client: Any, api_user: Any, sender: Sender, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tidings.sending")
    clock = Clock(utcnow())
    campaign_id = started_campaign(client, api_user.headers, 12, clock)
    worker = stepping_worker(sender, clock)
    worker.fan_out()
    start = clock.now
    for n in range(1, 13):
        clock.now = start + timedelta(seconds=61 * n)
        step(worker)
    lines = progress_lines(caplog, campaign_id)
    # A line each minute although a batch is less than a tenth... and each email here is more than one.
    assert len(lines) == 1 + 11 + 1
    assert lines[1] == f"campaign {campaign_id}: 1 of 12 emails done (8%), 0.0 emails/s, 0 failed"
    assert lines[-1] == f"campaign {campaign_id} finished: 12 sent, 0 failed in 732.0 s (0.0 emails/s)"


def test_a_campaign_finished_by_cancellations_is_settled_from_the_database_when_idle(
    client: Any, api_user: Any, db: Session, sender: Sender, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tidings.sending")
    clock = Clock(utcnow())
    campaign_id = started_campaign(client, api_user.headers, 10, clock)
    worker = stepping_worker(sender, clock)
    worker.fan_out()
    client.delete(f"/contacts/{contact_id(db, 'reader4@example.com')}", headers=api_user.headers)
    start = clock.now
    for n in range(1, 10):
        clock.now = start + timedelta(seconds=n)
        assert step(worker) == 1
    c = f"campaign {campaign_id}"
    assert (
        progress_lines(caplog, campaign_id)[-1] == f"{c}: 9 of 10 emails done (90%), 1.0 emails/s, 0 failed"
    )
    clock.now = start + timedelta(seconds=10)
    assert step(worker) == 0  # nothing left to claim: the worker asks the database how it stands
    assert progress_lines(caplog, campaign_id)[-1] == (
        f"{c} finished: 9 sent, 0 failed, 1 cancelled in 10.0 s (0.9 emails/s)"
    )
    assert step(worker) == 0
    assert len(progress_lines(caplog, campaign_id)) == 1 + 9 + 1
