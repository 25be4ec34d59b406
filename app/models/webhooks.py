"""Account webhooks of the email API (events out): the endpoints an account registered, the events
waiting for or done with delivery (the outbox: one row per event and endpoint), and every attempt made
(the delivery log)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from app.kit.call_outcome import CallOutcome
from app.models.base import Base
from app.models.feeds import JsonValue
from app.models.states import EventState, StateColumn

# The partial index's predicate, also written word for word by the claim so the planner can use it.
PENDING_EVENTS = f"state = '{EventState.PENDING}'"

# SQLite's rowid only autoincrements as INTEGER PRIMARY KEY; PostgreSQL gets a bigint.
EventId = BigInteger().with_variant(Integer(), "sqlite")


class AccountWebhook(Base):
    __tablename__ = "account_webhooks"
    __table_args__ = (Index("ix_account_webhooks_account_id_id", "account_id", "id"),)

    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    url: Mapped[str] = mapped_column(String(2048))
    # The event types asked for, as given (the answer's `events`), and as bits (what emitting tests).
    events: Mapped[list[str]] = mapped_column(JsonValue, default=list)
    event_mask: Mapped[int] = mapped_column(default=0)
    # The Standard Webhooks signing secret (`whsec_` and base64); the receiver holds the same.
    secret: Mapped[str] = mapped_column(String(100))
    # The secret before the last rotation: deliveries are signed with it too until previous_secret_until,
    # so receivers can switch to the new one within that grace period.
    previous_secret: Mapped[str | None] = mapped_column(String(100), default=None)
    previous_secret_until: Mapped[datetime | None] = mapped_column(default=None)
    created_at: Mapped[datetime] = mapped_column()


class WebhookEvent(Base):
    __tablename__ = "webhook_events"
    __table_args__ = (
        # The claim: what is due, oldest first.
        Index(
            "ix_webhook_events_due",
            "next_attempt_at",
            postgresql_where=text(PENDING_EVENTS),
            sqlite_where=text(PENDING_EVENTS),
        ),
        # Order per contact: is an earlier event of the same endpoint and key still undelivered?
        Index("ix_webhook_events_webhook_id_order_key_id", "webhook_id", "order_key", "id"),
    )

    id: Mapped[int] = mapped_column(EventId, primary_key=True, autoincrement=True)
    webhook_id: Mapped[str] = mapped_column(ForeignKey("account_webhooks.id", ondelete="CASCADE"))
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    type: Mapped[str] = mapped_column(String(40))
    # Events with the same key reach the endpoint in the order they happened (`contact:12`, `campaign:3`).
    order_key: Mapped[str] = mapped_column(String(40))
    # The JSON body sent, the same bytes at every attempt.
    body: Mapped[str] = mapped_column(Text)
    state: Mapped[EventState] = mapped_column(StateColumn(EventState, 16), default=EventState.PENDING)
    attempts: Mapped[int] = mapped_column(default=0)
    next_attempt_at: Mapped[datetime] = mapped_column()
    # A claimed event's lease: past it, the sweep hands the event back to the queue.
    lease_until: Mapped[datetime | None] = mapped_column(default=None)
    created_at: Mapped[datetime] = mapped_column()
    completed_at: Mapped[datetime | None] = mapped_column(default=None)


class WebhookAttempt(Base):
    __tablename__ = "webhook_attempts"
    __table_args__ = (Index("ix_webhook_attempts_webhook_id_id", "webhook_id", "id"),)

    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    webhook_id: Mapped[str] = mapped_column(ForeignKey("account_webhooks.id", ondelete="CASCADE"))
    event_id: Mapped[int] = mapped_column(ForeignKey("webhook_events.id", ondelete="CASCADE"), index=True)
    event_type: Mapped[str] = mapped_column(String(40))
    attempt: Mapped[int] = mapped_column()
    state: Mapped[CallOutcome] = mapped_column(StateColumn(CallOutcome, 16))
    http_status: Mapped[int | None] = mapped_column(default=None)
    error: Mapped[str] = mapped_column(Text, default="")
    started_at: Mapped[datetime] = mapped_column()
    completed_at: Mapped[datetime] = mapped_column()
