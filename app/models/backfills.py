"""Backfills: an explicit request to run one action again over the items its previous step passed
within a window (openmagpie's `magpie backfill`). Tidings does the work in the request: a row records
what it did, for `GET /v1/action-backfills[/{id}]`."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base
from app.models.states import ActionKind, BackfillState, StateColumn


class ActionBackfill(Base):
    __tablename__ = "action_backfills"
    __table_args__ = (Index("ix_action_backfills_account_id_id", "account_id", "id"),)

    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    # Kept when the action is deleted: the record of what was done stays readable.
    target_action_id: Mapped[str] = mapped_column(String(26))
    # The step whose passes were the items; empty when the target heads its chain (the feeds' items).
    source_action_id: Mapped[str] = mapped_column(String(26), default="")
    kind: Mapped[ActionKind] = mapped_column(StateColumn(ActionKind, 32))
    state: Mapped[BackfillState] = mapped_column(StateColumn(BackfillState, 16))
    replace: Mapped[bool] = mapped_column(default=False)
    occurred_since: Mapped[datetime | None] = mapped_column(default=None)
    occurred_until: Mapped[datetime | None] = mapped_column(default=None)
    completed_since: Mapped[datetime | None] = mapped_column(default=None)
    completed_until: Mapped[datetime | None] = mapped_column(default=None)
    matched: Mapped[int] = mapped_column(default=0)
    present: Mapped[int] = mapped_column(default=0)
    pruned: Mapped[int] = mapped_column(default=0)
    deleted: Mapped[int] = mapped_column(default=0)
    enqueued: Mapped[int] = mapped_column(default=0)
    error: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column()
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    completed_at: Mapped[datetime | None] = mapped_column(default=None)
