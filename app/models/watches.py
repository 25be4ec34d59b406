"""Watches: the feeds each one subscribes to, and its ordered chain of actions."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, Timestamped
from app.models.feeds import JsonValue
from app.models.states import ActionKind, StateColumn


class Watch(Timestamped, Base):
    __tablename__ = "watches"
    __table_args__ = (Index("ix_watches_account_id_id", "account_id", "id"),)

    # ULID: lists page by id, newest first.
    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    # The creator, for the record; reads are scoped by account, not by user.
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"), default=None)
    name: Mapped[str] = mapped_column(String(200))
    is_active: Mapped[bool] = mapped_column(default=True)


class WatchFeed(Base):
    """One subscription: the watch runs its chain on every item the feed stores from then on."""

    __tablename__ = "watch_feeds"

    watch_id: Mapped[str] = mapped_column(ForeignKey("watches.id", ondelete="CASCADE"), primary_key=True)
    # The poller's question, per new item: which watches listen to this feed?
    feed_id: Mapped[str] = mapped_column(
        ForeignKey("feeds.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    created_at: Mapped[datetime] = mapped_column()


class WatchAction(Timestamped, Base):
    __tablename__ = "watch_actions"
    __table_args__ = (UniqueConstraint("watch_id", "rank"),)

    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    watch_id: Mapped[str] = mapped_column(ForeignKey("watches.id", ondelete="CASCADE"))
    kind: Mapped[ActionKind] = mapped_column(StateColumn(ActionKind, 32))
    # Dense, 0 to n-1: the chain runs in rank order.
    rank: Mapped[int] = mapped_column()
    # The kind's config as validated on write, secrets included (masked only on the way out).
    config: Mapped[dict[str, Any]] = mapped_column(JsonValue)
