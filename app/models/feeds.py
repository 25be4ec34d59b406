"""Feeds, their sources (with each source's polling state), and the items the sources produced."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, String, Text, UniqueConstraint, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, Timestamped
from app.models.states import StateColumn

# JSON on SQLite, JSONB on PostgreSQL (smaller, and parsed once on the way in).
JsonValue = JSON().with_variant(JSONB(), "postgresql")


class SourceKind(StrEnum):
    """What a source reads; each kind's connector is `app/feeds/connectors/CONNECTORS[kind]`."""

    FORUM_COMMUNITY = "forum_community"
    RSS = "rss"
    BOARD_FEED = "board_feed"
    BOARD_COMMENT = "board_comment"


# The predicate of the failing sources' partial index (the metrics gauge queries it word for word).
FAILING_SOURCES = "consecutive_failures > 0"


class Feed(Timestamped, Base):
    __tablename__ = "feeds"
    __table_args__ = (
        Index("ix_feeds_account_id_id", "account_id", "id"),
        # The poller's question: which active feeds are due?
        Index(
            "ix_feeds_due", "next_poll_at", postgresql_where=text("is_active"), sqlite_where=text("is_active")
        ),
    )

    # ULID: time-sortable, so lists page by id, newest first.
    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    # The creator, for the record; reads are scoped by account, not by user.
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"), default=None)
    name: Mapped[str] = mapped_column(String(200))
    # A string, not an enum: a feed of a kind Tidings does not make (written by another tool on the same
    # database) must stay readable, to be refused as `kind_immutable`.
    kind: Mapped[str] = mapped_column(String(32), default="curated")
    is_active: Mapped[bool] = mapped_column(default=True)
    poll_interval_seconds: Mapped[int] = mapped_column(default=300)
    retention_days: Mapped[int] = mapped_column(default=30)
    default_field_map: Mapped[dict[str, str]] = mapped_column(JsonValue, default=dict)
    last_polled_at: Mapped[datetime | None] = mapped_column(default=None)
    next_poll_at: Mapped[datetime | None] = mapped_column(default=None)
    # What went wrong in the last poll (null when it went well), and how many polls in a row failed.
    last_error: Mapped[str | None] = mapped_column(Text, default=None)
    consecutive_failures: Mapped[int] = mapped_column(default=0)
    # A worker's claim: until `lease_until` no other worker polls the feed; `lease_token` tells the
    # worker, when it records, whether the claim is still its own.
    lease_until: Mapped[datetime | None] = mapped_column(default=None)
    lease_token: Mapped[str | None] = mapped_column(String(32), default=None)


class Source(Timestamped, Base):
    __tablename__ = "feed_sources"
    __table_args__ = (
        UniqueConstraint("feed_id", "spec_hash"),
        # The failing sources (the metrics gauge counts them at every scrape): only they are in it, so
        # a healthy source's poll never touches it.
        Index(
            "ix_feed_sources_failing",
            "retry_at",
            postgresql_where=text(FAILING_SOURCES),
            sqlite_where=text(FAILING_SOURCES),
        ),
    )

    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    feed_id: Mapped[str] = mapped_column(ForeignKey("feeds.id", ondelete="CASCADE"))
    kind: Mapped[SourceKind] = mapped_column(StateColumn(SourceKind, 32))
    spec: Mapped[dict[str, Any]] = mapped_column(JsonValue)
    # SHA-256 of the canonical spec: a source's identity within its feed (replace-by-diff keys on it).
    spec_hash: Mapped[str] = mapped_column(String(64))
    display: Mapped[str] = mapped_column(String(600))
    meta: Mapped[dict[str, str]] = mapped_column(JsonValue, default=dict)
    field_map: Mapped[dict[str, str]] = mapped_column(JsonValue, default=dict)
    # Where collection starts (now for live mode, or the backfill moment); never moves.
    start_at: Mapped[datetime] = mapped_column()
    # The newest item seen so far (the watermark); starts at start_at and only moves forward.
    last_event_at: Mapped[datetime | None] = mapped_column(default=None)
    # RSS conditional GET validators.
    etag: Mapped[str | None] = mapped_column(String(500), default=None)
    last_modified: Mapped[str | None] = mapped_column(String(100), default=None)
    last_polled_at: Mapped[datetime | None] = mapped_column(default=None)
    last_error: Mapped[str | None] = mapped_column(Text, default=None)
    consecutive_failures: Mapped[int] = mapped_column(default=0)
    # A failing source is not fetched again before this moment (exponential backoff, Retry-After).
    retry_at: Mapped[datetime | None] = mapped_column(default=None)
    # Digests of the external ids of the undated entries in the last document fetched. An undated
    # entry is new only when it was not there last time: without a date, nothing else tells an entry
    # that retention pruned (still listed by its feed) from one just published.
    undated_seen: Mapped[list[str]] = mapped_column(JsonValue, default=list, server_default=text("'[]'"))


class FeedItem(Base):
    __tablename__ = "feed_items"
    __table_args__ = (
        # Deduplication: a source yields each external id once.
        UniqueConstraint("source_id", "external_id"),
        # Listing (newest first) and pruning (oldest ids) of one feed.
        Index("ix_feed_items_feed_id_id", "feed_id", "id"),
    )

    # ULID made when the item was stored: the item log sorts by it, newest first.
    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    feed_id: Mapped[str] = mapped_column(ForeignKey("feeds.id", ondelete="CASCADE"))
    # Items outlive the removal of their source (they are the feed's log); the link is then cleared.
    source_id: Mapped[str | None] = mapped_column(ForeignKey("feed_sources.id", ondelete="SET NULL"))
    source_kind: Mapped[str] = mapped_column(String(32))
    source_label: Mapped[str] = mapped_column(String(600), default="")
    external_id: Mapped[str] = mapped_column(String(500))
    occurred_at: Mapped[datetime | None] = mapped_column(default=None)
    data: Mapped[dict[str, Any]] = mapped_column(JsonValue)
