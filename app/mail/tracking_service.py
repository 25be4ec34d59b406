"""What the emails' links record: opens, clicks and unsubscribes (the routes are in tracking_routes.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import psycopg
from psycopg_pool import AsyncConnectionPool
from sqlalchemy import Table, Text, bindparam, insert, literal, select, update
from sqlalchemy.orm import Session

from app.db import TwoWayStatement
from app.mail.automations.automation_runs import fires_on_campaign_event, on_campaign_event
from app.mail.contact_service import unsubscribe_contacts
from app.mail.events.emit import (
    OUTBOX_COLUMNS,
    ContactEvent,
    contact_bodies,
    emit_contact_events,
    outbox_rows,
    wanting,
)
from app.mail.events.types import EventType
from app.models import AccountWebhook, Campaign, Contact, Deliverable, LinkClick, WebhookEvent
from app.models.base import UTCDateTime


@dataclass(frozen=True, slots=True)
class Hit:
    account_id: int
    campaign_id: int
    contact_id: int


def _stamp_once(session: Session, deliverable_id: int, column: Any, now: datetime) -> Hit | None:
    """Set a deliverable's event time if it is still empty; the Hit when this call set it."""
    row = session.execute(
        update(Deliverable)
        .where(Deliverable.id == deliverable_id, column.is_(None))
        .values({column.key: now, "updated_at": now})
        .returning(Deliverable.account_id, Deliverable.campaign_id, Deliverable.contact_id)
        .execution_options(synchronize_session=False)
    ).first()
    return Hit(*row) if row is not None else None


# The statements of the open's path, each defined once: `record_open` runs them through a session,
# `record_open_on_pool` on psycopg's async pool.

# The first open stamped: no row when the email was opened before (or does not exist).
_now = bindparam("now", type_=UTCDateTime())
OPEN_STAMP = TwoWayStatement.of(
    update(Deliverable)
    .where(Deliverable.id == bindparam("deliverable_id"), Deliverable.opened_at.is_(None))
    .values(opened_at=_now, updated_at=_now)
    .returning(Deliverable.account_id, Deliverable.campaign_id, Deliverable.contact_id)
    .execution_options(synchronize_session=False)
)
# What recording it needs to know, one row per webhook that wants the event (one row with no webhook
# when none does): the contact's email, whether the open fires an automation.
OPEN_CONTEXT = TwoWayStatement.of(
    select(
        Contact.email,
        fires_on_campaign_event("open_campaign", bindparam("campaign_id"), bindparam("account_id")),
        AccountWebhook.id,
    )
    .select_from(Contact)
    .outerjoin(AccountWebhook, wanting(bindparam("account_id"), bindparam("bit")))
    .where(Contact.id == bindparam("contact_id"))
)
# Inline: no RETURNING of the new ids, which nothing reads.
OUTBOX_INSERT = TwoWayStatement.of(
    insert(cast(Table, WebhookEvent.__table__))
    .values({name: bindparam(name) for name in OUTBOX_COLUMNS})
    .inline()
)


@dataclass(frozen=True, slots=True)
class OpenContext:
    email: str | None
    automated: bool
    hooks: list[str]

    @classmethod
    def of(cls, rows: Sequence[Any]) -> OpenContext:
        email, automated = (rows[0][0], bool(rows[0][1])) if rows else (None, False)
        return cls(email, automated, [row[2] for row in rows if row[2] is not None])


def _context_values(hit: Hit) -> dict[str, Any]:
    return {
        "account_id": hit.account_id,
        "campaign_id": hit.campaign_id,
        "contact_id": hit.contact_id,
        "bit": EventType.CONTACT_OPENED.bit,
    }


def _open_events(hit: Hit, context: OpenContext, now: datetime) -> list[dict[str, Any]]:
    events = [ContactEvent(hit.contact_id, campaign_id=hit.campaign_id)]
    bodies = contact_bodies(events, {hit.contact_id: context.email})
    return outbox_rows(hit.account_id, context.hooks, EventType.CONTACT_OPENED, bodies, now)


def record_open(session: Session, deliverable_id: int, now: datetime) -> None:
    """The email's first open: stamped, its open automations fired, its `contact.opened` event written."""
    row = session.execute(OPEN_STAMP.statement, {"deliverable_id": deliverable_id, "now": now}).first()
    if row is None:
        return
    hit = Hit(*row)
    context = OpenContext.of(session.execute(OPEN_CONTEXT.statement, _context_values(hit)).all())
    if context.automated:
        _fire(session, hit, "open_campaign", now)
    if context.hooks:
        session.execute(OUTBOX_INSERT.statement, _open_events(hit, context, now))


async def record_open_on_pool(pool: AsyncConnectionPool, deliverable_id: int, now: datetime) -> bool:
    """`record_open` on the event loop, with psycopg's async pool (PostgreSQL), in one transaction of
    the same statements. False, with nothing written, when the open would fire an automation: that
    rarer case the caller records through `record_open` (the automation service runs on a session)."""
    naive_now = now.astimezone(UTC).replace(tzinfo=None)  # what the timestamp columns store
    async with pool.connection() as conn, conn.transaction():
        cursor = await conn.execute(
            OPEN_STAMP.psycopg.sql, OPEN_STAMP.psycopg.params(deliverable_id=deliverable_id, now=naive_now)
        )
        row = await cursor.fetchone()
        if row is None:
            return True
        hit = Hit(*row)
        cursor = await conn.execute(
            OPEN_CONTEXT.psycopg.sql, OPEN_CONTEXT.psycopg.params(**_context_values(hit))
        )
        context = OpenContext.of(await cursor.fetchall())
        if context.automated:
            raise psycopg.Rollback()
        if context.hooks:
            async with conn.cursor() as writer:
                await writer.executemany(OUTBOX_INSERT.psycopg.sql, _open_events(hit, context, naive_now))
        return True
    return False


def record_click(session: Session, deliverable_id: int, url: str, now: datetime) -> None:
    """Every click is kept with its link's URL (the report's clicks per link); the email's first also
    stamps it clicked (and opened), fires its click automations and writes `contact.clicked`. A token
    of no email (a preview's, a test email's) records nothing."""
    session.execute(
        insert(LinkClick).from_select(
            ["campaign_id", "deliverable_id", "url", "clicked_at"],
            select(
                Deliverable.campaign_id,
                Deliverable.id,
                literal(url, Text()),
                literal(now, UTCDateTime()),
            ).where(Deliverable.id == deliverable_id),
        )
    )
    clicked = _stamp_once(session, deliverable_id, Deliverable.clicked_at, now)
    if clicked is None:
        return  # a repeat click: the first one recorded the open too
    record_open(session, deliverable_id, now)
    _fire(session, clicked, "click_campaign", now)
    _tell(session, clicked, EventType.CONTACT_CLICKED, now)


def _fire(session: Session, hit: Hit, trigger_type: str, now: datetime) -> None:
    on_campaign_event(session, hit.account_id, hit.campaign_id, hit.contact_id, trigger_type, now)


def _tell(session: Session, hit: Hit, event_type: EventType, now: datetime) -> None:
    event = ContactEvent(hit.contact_id, campaign_id=hit.campaign_id)
    emit_contact_events(session, hit.account_id, event_type, [event], now)


@dataclass(frozen=True, slots=True)
class Sender:
    from_name: str


def sender_of(session: Session, deliverable_id: int) -> Sender | None:
    """Who sent the email (for the confirmation page); None when the deliverable no longer exists."""
    from_name = session.scalar(
        select(Campaign.from_name)
        .join(Deliverable, Deliverable.campaign_id == Campaign.id)
        .where(Deliverable.id == deliverable_id)
    )
    return Sender(from_name) if from_name is not None else None


def unsubscribe_by_link(session: Session, deliverable_id: int, now: datetime) -> Sender | None:
    """Unsubscribe the email's contact; the email is stamped when it is what made the contact leave.
    None when the deliverable no longer exists."""
    row = session.execute(
        select(Deliverable.contact_id, Campaign.from_name)
        .join(Campaign, Campaign.id == Deliverable.campaign_id)
        .where(Deliverable.id == deliverable_id)
    ).first()
    if row is None:
        return None
    if unsubscribe_contacts(session, [row.contact_id], now):
        _stamp_once(session, deliverable_id, Deliverable.unsubscribed_at, now)
    return Sender(row.from_name)
