"""Writing events into the outbox, in the caller's transaction (the change and its event commit or
roll back together). An account without a webhook that wants the event pays one indexed lookup."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import ColumnElement, and_, bindparam, insert, select
from sqlalchemy.orm import Session

from app.kit.time import iso_millis
from app.mail.events.types import EventType
from app.models import AccountWebhook, Contact, EventState, WebhookEvent


@dataclass(frozen=True, slots=True)
class ContactEvent:
    """What happened to one contact; `campaign_id` when it is about an email, `list_id` for a list."""

    contact_id: int
    campaign_id: int | None = None
    list_id: int | None = None


def wanting(account_id: Any, bit: Any) -> ColumnElement[bool]:
    """The condition on `account_webhooks` of the account's webhooks that want the event type whose
    EventType.bit is `bit` (values or bound parameters)."""
    return and_(AccountWebhook.account_id == account_id, AccountWebhook.event_mask.op("&")(bit) != 0)


# The account's webhooks that want an event type.
HOOKS_WANTING = select(AccountWebhook.id).where(wanting(bindparam("account_id"), bindparam("bit")))


def _hooks_wanting(session: Session, account_id: int, event_type: EventType) -> list[str]:
    return list(session.scalars(HOOKS_WANTING, {"account_id": account_id, "bit": event_type.bit}))


# The columns of an outbox row as `outbox_rows` makes it.
OUTBOX_COLUMNS = (
    "webhook_id",
    "account_id",
    "type",
    "order_key",
    "body",
    "state",
    "attempts",
    "next_attempt_at",
    "created_at",
)


def outbox_rows(
    account_id: int,
    hooks: list[str],
    event_type: EventType,
    bodies: list[tuple[str, dict[str, Any]]],
    now: datetime,
) -> list[dict[str, Any]]:
    """One outbox row per endpoint and event: (order key, data) pairs become Standard Webhooks bodies."""
    stamp = iso_millis(now)
    rows: list[dict[str, Any]] = []
    for order_key, data in bodies:
        body = orjson.dumps({"type": str(event_type), "timestamp": stamp, "data": data}).decode()
        rows.extend(
            {
                "webhook_id": hook,
                "account_id": account_id,
                "type": str(event_type),
                "order_key": order_key,
                "body": body,
                "state": EventState.PENDING,
                "attempts": 0,
                "next_attempt_at": now,
                "created_at": now,
            }
            for hook in hooks
        )
    return rows


def _write(
    session: Session,
    account_id: int,
    hooks: list[str],
    event_type: EventType,
    bodies: list[tuple[str, dict[str, Any]]],
    now: datetime,
) -> None:
    rows = outbox_rows(account_id, hooks, event_type, bodies, now)
    if rows:
        session.execute(insert(WebhookEvent), rows)


def contact_bodies(
    events: Sequence[ContactEvent], emails: Mapping[int, str | None]
) -> list[tuple[str, dict[str, Any]]]:
    """The (order key, data) pairs of contact events: ordered per contact, the contact named with its
    email."""
    bodies = []
    for event in events:
        data: dict[str, Any] = {"contact": {"id": event.contact_id, "email": emails.get(event.contact_id)}}
        if event.campaign_id is not None:
            data["campaign_id"] = event.campaign_id
        if event.list_id is not None:
            data["list_id"] = event.list_id
        bodies.append((f"contact:{event.contact_id}", data))
    return bodies


def emit_contact_events(
    session: Session, account_id: int, event_type: EventType, events: Sequence[ContactEvent], now: datetime
) -> None:
    """Tell the account's webhooks what happened to these contacts (ordered per contact)."""
    if not events:
        return
    hooks = _hooks_wanting(session, account_id, event_type)
    if not hooks:
        return
    ids = {event.contact_id for event in events}
    emails: dict[int, str | None] = {
        contact_id: email
        for contact_id, email in session.execute(select(Contact.id, Contact.email).where(Contact.id.in_(ids)))
    }
    _write(session, account_id, hooks, event_type, contact_bodies(events, emails), now)


def emit_campaign_event(
    session: Session, account_id: int, event_type: EventType, data: dict[str, Any], now: datetime
) -> None:
    """Tell the account's webhooks what happened to a campaign (`data` names it under `campaign`):
    it finished sending, or its sender paused, resumed or cancelled it."""
    hooks = _hooks_wanting(session, account_id, event_type)
    if hooks:
        _write(session, account_id, hooks, event_type, [(f"campaign:{data['campaign']['id']}", data)], now)


def emit_per_account(
    session: Session, event_type: EventType, events: Sequence[tuple[int, ContactEvent]], now: datetime
) -> None:
    """`emit_contact_events` for (account id, event) pairs that may span accounts (bounce reports)."""
    by_account: dict[int, list[ContactEvent]] = {}
    for account_id, event in events:
        by_account.setdefault(account_id, []).append(event)
    for account_id, account_events in sorted(by_account.items()):
        emit_contact_events(session, account_id, event_type, account_events, now)


def emit_test_event(
    session: Session, account_id: int, hook_id: str, event_type: EventType, now: datetime
) -> None:
    """An example of `event_type` for one endpoint only (the console's "Send a test event"): its data
    says `test: true` and names no real contact, and it is signed, sent and logged as any event is."""
    data = {"test": True, "contact": {"id": 0, "email": "test@example.com"}}
    _write(session, account_id, [hook_id], event_type, [("test", data)], now)
