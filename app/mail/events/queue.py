"""The event outbox as a work queue: claim what is due (never an event while an earlier one of the
same endpoint and key is undelivered, so a contact's events arrive in order), record each attempt,
retry on the schedule below, hand back what a dead worker held.

Retries follow the schedule Standard Webhooks' reference service (Svix) uses, cut to stay within a
day: after 1 s, 5 s, 5 min, 30 min, 2 h, 5 h and 10 h (eight attempts over about 17.6 hours); an event
still undelivered 24 hours after it happened is given up whatever its attempts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import Any, cast

from sqlalchemy import (
    Integer,
    Select,
    String,
    Table,
    Update,
    bindparam,
    exists,
    func,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session, aliased

from app.kit.call_outcome import CallOutcome
from app.kit.ids import new_ulid
from app.kit.webhook_call import CallResult
from app.models import AccountWebhook, EventState, WebhookAttempt, WebhookEvent
from app.models.webhooks import PENDING_EVENTS

RETRY_DELAYS = (
    timedelta(seconds=1),
    timedelta(seconds=5),
    timedelta(minutes=5),
    timedelta(minutes=30),
    timedelta(hours=2),
    timedelta(hours=5),
    timedelta(hours=10),
)
MAX_ATTEMPTS = len(RETRY_DELAYS) + 1
GIVE_UP_AFTER = timedelta(hours=24)


@dataclass(frozen=True, slots=True)
class ClaimedEvent:
    id: int
    webhook_id: str
    url: str
    # The endpoint's secret, and during a rotation's grace period the previous one: each signs.
    secrets: tuple[str, ...]
    type: str
    body: str
    # This attempt's number (1 for the first); also the fence when it is recorded.
    attempt: int
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Attempted:
    event: ClaimedEvent
    result: CallResult
    started_at: datetime
    completed_at: datetime


@cache
def _due_events() -> Select[*tuple[Any, ...]]:
    """The claim's query, built once: every worker runs it twice a second per lane even with nothing to
    deliver, and building it (an aliased table's clauses are made afresh each time) cost several times
    what running it on an empty outbox does (about 4 ms of CPU a call before)."""
    earlier = aliased(WebhookEvent)
    blocked = exists().where(
        earlier.webhook_id == WebhookEvent.webhook_id,
        earlier.order_key == WebhookEvent.order_key,
        earlier.id < WebhookEvent.id,
        earlier.state.in_((EventState.PENDING, EventState.SENDING)),
    )
    return (
        select(
            WebhookEvent.id,
            WebhookEvent.webhook_id,
            AccountWebhook.url,
            AccountWebhook.secret,
            AccountWebhook.previous_secret,
            AccountWebhook.previous_secret_until,
            WebhookEvent.type,
            WebhookEvent.body,
            WebhookEvent.attempts,
            WebhookEvent.created_at,
        )
        .join(AccountWebhook, AccountWebhook.id == WebhookEvent.webhook_id)
        # Word for word the partial index's predicate.
        .where(
            text(f"webhook_events.{PENDING_EVENTS}"),
            WebhookEvent.next_attempt_at <= bindparam("now"),
            ~blocked,
        )
        .order_by(WebhookEvent.id)
        .limit(bindparam("limit", type_=Integer))
        .with_for_update(of=WebhookEvent, skip_locked=True)
    )


def claim_events(session: Session, now: datetime, limit: int, lease: timedelta) -> list[ClaimedEvent]:
    """Up to `limit` due events, marked `sending` until `now + lease`."""
    rows = session.execute(_due_events(), {"now": now, "limit": limit}).all()
    if not rows:
        return []
    session.execute(
        update(WebhookEvent)
        .where(WebhookEvent.id.in_([row.id for row in rows]))
        .values(state=EventState.SENDING, attempts=WebhookEvent.attempts + 1, lease_until=now + lease)
        .execution_options(synchronize_session=False)
    )
    return [
        ClaimedEvent(
            row.id,
            row.webhook_id,
            row.url,
            _signing_secrets(row.secret, row.previous_secret, row.previous_secret_until, now),
            row.type,
            row.body,
            row.attempts + 1,
            row.created_at,
        )
        for row in rows
    ]


def _signing_secrets(
    secret: str, previous: str | None, previous_until: datetime | None, now: datetime
) -> tuple[str, ...]:
    if previous is not None and previous_until is not None and now < previous_until:
        return (secret, previous)
    return (secret,)


def _next_state(attempted: Attempted, now: datetime) -> dict[str, object]:
    event, state = attempted.event, attempted.result.state
    if state == CallOutcome.SUCCEEDED:
        return {"state": EventState.DELIVERED, "next_attempt_at": now, "completed_at": now}
    retry_at = now + RETRY_DELAYS[min(event.attempt, len(RETRY_DELAYS)) - 1]
    if (
        state == CallOutcome.ERRORED
        or event.attempt >= MAX_ATTEMPTS
        or retry_at - event.created_at > GIVE_UP_AFTER
    ):
        return {"state": EventState.FAILED, "next_attempt_at": now, "completed_at": now}
    return {"state": EventState.PENDING, "next_attempt_at": retry_at, "completed_at": None}


def record_attempts(session: Session, attempts: Sequence[Attempted], now: datetime) -> None:
    """Log each attempt and settle its event: delivered, failed for good, or pending until its retry.
    An event whose lease was taken back and claimed again meanwhile (a later attempt) is left alone."""
    if not attempts:
        return
    session.execute(
        # The Core table: the ORM's bulk INSERT adds per-row bookkeeping the outbox has no use for.
        insert(cast(Table, WebhookAttempt.__table__)),
        [
            {
                "id": new_ulid(),
                "webhook_id": done.event.webhook_id,
                "event_id": done.event.id,
                "event_type": done.event.type,
                "attempt": done.event.attempt,
                "state": done.result.state,
                "http_status": done.result.http_status,
                "error": done.result.error[:2000],
                "started_at": done.started_at,
                "completed_at": done.completed_at,
            }
            for done in attempts
        ],
    )
    settled = [(done.event.id, done.event.attempt, _next_state(done, now)) for done in attempts]
    if session.get_bind().dialect.name == "postgresql":
        session.execute(
            _settle_statement(postgres=True),
            {
                "ids": [event_id for event_id, _, _ in settled],
                "attempt_numbers": [attempt for _, attempt, _ in settled],
                "states": [after["state"] for _, _, after in settled],
                "retry_ats": [after["next_attempt_at"] for _, _, after in settled],
                "done_ats": [after["completed_at"] for _, _, after in settled],
            },
        )
        return
    session.execute(
        _settle_statement(postgres=False),
        [
            {
                "event_id": event_id,
                "attempt": attempt,
                "new_state": after["state"],
                "retry_at": after["next_attempt_at"],
                "done_at": after["completed_at"],
            }
            for event_id, attempt, after in settled
        ],
    )


@cache
def _settle_statement(*, postgres: bool) -> Update:
    """Settling a batch: on PostgreSQL one UPDATE joined to the unnested arrays of each event's id,
    attempt and outcome (one statement, five parameters), elsewhere one UPDATE run for each event (an
    executemany). Built once: building a statement and its cache key costs more than running it.
    An event is settled only while it is still `sending` under the attempt that was made."""
    table = cast(Table, WebhookEvent.__table__)
    if postgres:
        rows = (
            func.unnest(
                bindparam("ids", type_=postgresql.ARRAY(table.c.id.type)),
                bindparam("attempt_numbers", type_=postgresql.ARRAY(Integer)),
                bindparam("states", type_=postgresql.ARRAY(String)),
                bindparam("retry_ats", type_=postgresql.ARRAY(table.c.next_attempt_at.type)),
                bindparam("done_ats", type_=postgresql.ARRAY(table.c.completed_at.type)),
            )
            .table_valued("id", "attempt", "state", "retry_at", "done_at")
            .render_derived(name="settled")
        )
        return (
            update(table)
            .where(
                table.c.id == rows.c.id,
                table.c.state == EventState.SENDING,
                table.c.attempts == rows.c.attempt,
            )
            .values(
                state=rows.c.state,
                next_attempt_at=rows.c.retry_at,
                completed_at=rows.c.done_at,
                lease_until=None,
            )
        )
    return (
        update(table)
        .where(
            table.c.id == bindparam("event_id"),
            table.c.state == EventState.SENDING,
            table.c.attempts == bindparam("attempt"),
        )
        .values(
            state=bindparam("new_state"),
            next_attempt_at=bindparam("retry_at"),
            completed_at=bindparam("done_at"),
            lease_until=None,
        )
    )


def take_back_stale(session: Session, now: datetime) -> int:
    """Events a worker claimed and never recorded (it died) go back to the queue, due now."""
    result = session.execute(
        update(WebhookEvent)
        .where(WebhookEvent.state == EventState.SENDING, WebhookEvent.lease_until < now)
        .values(state=EventState.PENDING, lease_until=None, next_attempt_at=now)
        .execution_options(synchronize_session=False)
    )
    return int(getattr(result, "rowcount", 0) or 0)
