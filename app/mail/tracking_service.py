"""What the emails' links record: opens, clicks and unsubscribes (the routes are in tracking_routes.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.mail.automation_runs import on_campaign_event
from app.mail.contact_service import unsubscribe_contacts
from app.mail.events.emit import ContactEvent, emit_contact_events
from app.mail.events.types import EventType
from app.models import Campaign, Deliverable


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


def record_open(session: Session, deliverable_id: int, now: datetime) -> None:
    opened = _stamp_once(session, deliverable_id, Deliverable.opened_at, now)
    if opened is not None:
        _fire(session, opened, "open_campaign", now)
        _tell(session, opened, EventType.CONTACT_OPENED, now)


def record_click(session: Session, deliverable_id: int, now: datetime) -> None:
    clicked = _stamp_once(session, deliverable_id, Deliverable.clicked_at, now)
    if clicked is None:
        return  # a repeat click: the first one recorded the open too
    opened = _stamp_once(session, deliverable_id, Deliverable.opened_at, now)
    if opened is not None:
        _fire(session, opened, "open_campaign", now)
        _tell(session, opened, EventType.CONTACT_OPENED, now)
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
