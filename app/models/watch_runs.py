"""Runs (one action executing on one feed item: the work queue) and deliveries (each outbound call a
webhook action made, one row per attempt)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, String, Text, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base
from app.models.feeds import JsonValue
from app.models.states import ActionKind, DeliveryState, RunState, StateColumn

# The predicates of the partial indexes, also for queries that must match them word for word (a bound
# parameter in place of a literal state does not prove a partial index usable once a plan is generic).
QUEUED_RUNS = f"state IN ('{RunState.PENDING}', '{RunState.FAILED}') AND completed_at IS NULL"
RUNNING_RUNS = f"state = '{RunState.RUNNING}'"
PENDING_DELIVERIES = f"state = '{DeliveryState.PENDING}'"


class WatchActionRun(Base):
    __tablename__ = "watch_action_runs"
    __table_args__ = (
        # One run per action and item: a retry is another attempt of the same row, and enqueueing
        # twice (a poll recorded twice, a chain advanced twice) adds nothing.
        UniqueConstraint("action_id", "feed_item_id"),
        # The drain's question: which runs are due? (pending, and failed ones waiting for a retry)
        Index(
            "ix_watch_action_runs_due",
            "scheduled_at",
            "id",
            postgresql_where=text(QUEUED_RUNS),
            sqlite_where=text(QUEUED_RUNS),
        ),
        # The sweep's question: which runs were left running?
        Index(
            "ix_watch_action_runs_running",
            "started_at",
            postgresql_where=text(RUNNING_RUNS),
            sqlite_where=text(RUNNING_RUNS),
        ),
        # An action's activity, newest first, and its summary (by completion time; null is backlog).
        Index("ix_watch_action_runs_action_id_id", "action_id", "id"),
        Index("ix_watch_action_runs_action_id_completed_at", "action_id", "completed_at"),
    )

    # ULID: an action's activity pages by id, newest first.
    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    watch_id: Mapped[str] = mapped_column(ForeignKey("watches.id", ondelete="CASCADE"))
    action_id: Mapped[str] = mapped_column(ForeignKey("watch_actions.id", ondelete="CASCADE"))
    # No foreign keys: a run outlives its item (retention prunes items) and records where it came from.
    feed_item_id: Mapped[str] = mapped_column(String(26))
    feed_id: Mapped[str] = mapped_column(String(26))
    # The action's kind when the run was made (its result's shape).
    kind: Mapped[ActionKind] = mapped_column(StateColumn(ActionKind, 32))
    state: Mapped[RunState] = mapped_column(StateColumn(RunState, 16), default=RunState.PENDING)
    # Attempts started so far; also the fence of a claim (a worker records only the attempt it ran).
    attempts: Mapped[int] = mapped_column(default=0)
    result: Mapped[dict[str, Any] | None] = mapped_column(JsonValue, default=None)
    error: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column()
    # When the run is due (again): now when enqueued, later for a retry or a digest's window.
    scheduled_at: Mapped[datetime | None] = mapped_column(default=None)
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    completed_at: Mapped[datetime | None] = mapped_column(default=None)
    # Digest actions: the end of the window the run was put in (set the first time the drain sees it).
    window_end: Mapped[datetime | None] = mapped_column(default=None)
    # The delivery that carried the item (webhook actions).
    delivery_id: Mapped[str | None] = mapped_column(String(26), default=None)


class WatchActionDelivery(Base):
    __tablename__ = "watch_action_deliveries"
    __table_args__ = (
        Index("ix_watch_action_deliveries_action_id_id", "action_id", "id"),
        # Calls in flight: the sweep's question (which were left pending?) and the queue gauge's. The
        # table keeps every attempt ever made, so without it both read all of it.
        Index(
            "ix_watch_action_deliveries_pending",
            "started_at",
            postgresql_where=text(PENDING_DELIVERIES),
            sqlite_where=text(PENDING_DELIVERIES),
        ),
    )

    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    watch_id: Mapped[str] = mapped_column(ForeignKey("watches.id", ondelete="CASCADE"))
    action_id: Mapped[str] = mapped_column(ForeignKey("watch_actions.id", ondelete="CASCADE"))
    delivery: Mapped[str] = mapped_column(String(16))
    method: Mapped[str] = mapped_column(String(8))
    state: Mapped[DeliveryState] = mapped_column(
        StateColumn(DeliveryState, 16), default=DeliveryState.PENDING
    )
    attempt: Mapped[int] = mapped_column(default=0)
    item_count: Mapped[int] = mapped_column(default=0)
    http_status: Mapped[int | None] = mapped_column(default=None)
    # The destination's host (and port) only: never its path, query or headers.
    target_host: Mapped[str] = mapped_column(String(300), default="")
    error: Mapped[str] = mapped_column(Text, default="")
    # The body as sent; headers are never stored.
    request_payload: Mapped[dict[str, Any]] = mapped_column(JsonValue, default=dict)
    created_at: Mapped[datetime] = mapped_column()
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    completed_at: Mapped[datetime | None] = mapped_column(default=None)
