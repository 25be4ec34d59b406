"""The open pixel's recording has one definition (tracking_service: OPEN_STAMP, OPEN_CONTEXT,
OUTBOX_INSERT) and two executors: `record_open` through a session (SQLite, the in-process tests, and
an open that fires an automation) and `record_open_on_pool` on the event loop with psycopg's pool
(PostgreSQL, what `tidings serve` runs for `GET /t/o`). Both run here over the same committed rows, at
the same instant, and must leave the same rows: the stamp, and the same outbox events byte for byte.

PostgreSQL only: the psycopg executor needs PostgreSQL and rows another connection can see."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session, sessionmaker

from app.db import is_sqlite_url, make_async_pool, transaction
from app.identity.accounts import create_user
from app.kit.ids import new_ulid
from app.mail.events.types import EventType, mask_of
from app.mail.tracking_service import record_open, record_open_on_pool
from app.models import (
    AccountWebhook,
    Automation,
    AutomationTrigger,
    Campaign,
    Contact,
    Deliverable,
    WebhookEvent,
)
from tests.scratch_database import scratch_sessions

AT = datetime(2026, 11, 26, 23, 59, 58, 123456, tzinfo=UTC)


@dataclass
class Rows:
    url: str
    factory: sessionmaker[Session]
    account_id: int
    user_id: int
    plain: int  # a deliverable of a campaign no automation watches
    watched: int  # a deliverable of a campaign whose opens start an automation
    contact_id: int


@pytest.fixture(scope="module")
def rows(database_url: str) -> Iterator[Rows]:
    if is_sqlite_url(database_url):
        pytest.skip("PostgreSQL only: the psycopg executor of GET /t/o runs on PostgreSQL alone")
    with scratch_sessions(database_url, "open_parity") as (url, factory):
        with transaction(factory) as session:
            user = create_user(session, email="owner@example.com", name="Owner", contact_limit=100)
            session.flush()
            contact = Contact(
                account_id=user.account_id, email='zoë"q@example.com', email_key='zoë"q@example.com'
            )
            campaigns = [
                Campaign(
                    account_id=user.account_id,
                    title=title,
                    subject="Hello",
                    html="<p>Hello</p>",
                    from_name="Owner",
                    from_email="owner@example.com",
                )
                for title in ("Plain", "Watched")
            ]
            session.add_all([contact, *campaigns])
            session.flush()
            deliverables = [
                Deliverable(
                    account_id=user.account_id,
                    campaign_id=campaign.id,
                    contact_id=contact.id,
                    state="sent",
                    attempts=1,
                    sent_at=AT,
                )
                for campaign in campaigns
            ]
            automation = Automation(account_id=user.account_id, user_id=user.id, title="Welcome", active=True)
            session.add_all([*deliverables, automation])
            session.flush()
            session.add(
                AutomationTrigger(
                    automation_id=automation.id, type="open_campaign", campaign_id=campaigns[1].id
                )
            )
            made = Rows(
                url, factory, user.account_id, user.id, deliverables[0].id, deliverables[1].id, contact.id
            )
        yield made


def hooks(rows: Rows, *event_lists: list[EventType]) -> None:
    """The account's webhooks, anew: one per list of event types."""
    with transaction(rows.factory) as session:
        session.execute(delete(AccountWebhook).where(AccountWebhook.account_id == rows.account_id))
        for n, types in enumerate(event_lists):
            session.add(
                AccountWebhook(
                    id=new_ulid(),
                    account_id=rows.account_id,
                    url=f"https://hooks.example.com/{n}",
                    events=[str(t) for t in types],
                    event_mask=mask_of(types),
                    secret="whsec_" + "A" * 32,
                    created_at=AT,
                )
            )


def unopened(rows: Rows) -> None:
    with transaction(rows.factory) as session:
        session.execute(delete(WebhookEvent))
        session.execute(update(Deliverable).values(opened_at=None))


def outcome(rows: Rows, deliverable_id: int) -> tuple[Any, list[tuple[Any, ...]]]:
    """The deliverable's opened_at, and the outbox as rows without their ids, in a stable order."""
    with rows.factory() as session:
        opened_at = session.scalar(select(Deliverable.opened_at).where(Deliverable.id == deliverable_id))
        events = session.execute(
            select(
                WebhookEvent.webhook_id,
                WebhookEvent.account_id,
                WebhookEvent.type,
                WebhookEvent.order_key,
                WebhookEvent.body,
                WebhookEvent.state,
                WebhookEvent.attempts,
                WebhookEvent.next_attempt_at,
                WebhookEvent.created_at,
            ).order_by(WebhookEvent.webhook_id)
        ).all()
    return opened_at, [tuple(event) for event in events]


def in_session(rows: Rows, deliverable_id: int) -> None:
    with transaction(rows.factory) as session:
        record_open(session, deliverable_id, AT)


def on_pool(rows: Rows, deliverable_id: int) -> bool:
    async def run() -> bool:
        pool = make_async_pool(rows.url, max_size=1)
        await pool.open()
        try:
            return await record_open_on_pool(pool, deliverable_id, AT)
        finally:
            await pool.close()

    return asyncio.run(run())


@pytest.mark.parametrize(
    "event_lists",
    [
        [],
        [[EventType.CONTACT_CLICKED]],
        [[EventType.CONTACT_OPENED]],
        [
            [EventType.CONTACT_OPENED, EventType.CONTACT_CLICKED],
            [EventType.CAMPAIGN_SENT],
            [EventType.CONTACT_OPENED],
        ],
    ],
    ids=["no webhook", "none wants opens", "one wants opens", "two of three want opens"],
)
def test_both_executors_record_a_first_open_alike(rows: Rows, event_lists: list[list[EventType]]) -> None:
    hooks(rows, *event_lists)
    unopened(rows)
    in_session(rows, rows.plain)
    by_session = outcome(rows, rows.plain)
    unopened(rows)
    assert on_pool(rows, rows.plain) is True
    by_pool = outcome(rows, rows.plain)
    assert by_pool == by_session
    opened_at, events = by_pool
    assert opened_at == AT
    wanting = sum(EventType.CONTACT_OPENED in types for types in event_lists)
    assert len(events) == wanting
    for event in events:
        assert event[2:4] == ("contact.opened", f"contact:{rows.contact_id}")
        assert '"email":"zoë\\"q@example.com"' in event[4]


def test_a_second_open_records_nothing_more_in_either(rows: Rows) -> None:
    hooks(rows, [EventType.CONTACT_OPENED])
    unopened(rows)
    assert on_pool(rows, rows.plain) is True
    first = outcome(rows, rows.plain)
    assert len(first[1]) == 1
    assert on_pool(rows, rows.plain) is True
    in_session(rows, rows.plain)
    assert outcome(rows, rows.plain) == first
    # An email that does not exist: nothing, and no error.
    assert on_pool(rows, rows.plain + 1000) is True


def test_an_open_that_starts_an_automation_is_left_to_the_session(rows: Rows) -> None:
    """The pool's path writes nothing and says so; the session's records it all (the automation fired)."""
    hooks(rows, [EventType.CONTACT_OPENED])
    unopened(rows)
    assert on_pool(rows, rows.watched) is False
    assert outcome(rows, rows.watched) == (None, [])
    in_session(rows, rows.watched)
    opened_at, events = outcome(rows, rows.watched)
    assert opened_at == AT
    assert len(events) == 1
    # Switched off, the automation no longer claims the open: the pool's path records it.
    with transaction(rows.factory) as session:
        session.execute(update(Automation).values(active=False))
    unopened(rows)
    assert on_pool(rows, rows.watched) is True
    assert outcome(rows, rows.watched) == (AT, events)
    with transaction(rows.factory) as session:
        session.execute(update(Automation).values(active=True))
