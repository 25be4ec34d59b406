"""Accounts (the tenant), their users, and personal access tokens."""

from __future__ import annotations

from datetime import date, datetime
from enum import StrEnum

from sqlalchemy import ForeignKey, Index, String, false, true
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, Timestamped
from app.models.states import StateColumn


class Plan(StrEnum):
    """An account's plan: `free` signs in and uses /v1 and `GET /me`; the paid ones the whole email API."""

    FREE = "free"
    LIFETIME = "lifetime"
    EMPIRE = "empire"


PAID_PLANS = frozenset({Plan.LIFETIME, Plan.EMPIRE})


class Account(Timestamped, Base):
    __tablename__ = "accounts"
    # The switches below come from the database's defaults, read when first used rather than returned by
    # each INSERT: rows written with an older schema's columns (the migrations' tests) still insert.
    __mapper_args__ = {"eager_defaults": False}

    id: Mapped[int] = mapped_column(primary_key=True)
    plan: Mapped[Plan] = mapped_column(StateColumn(Plan, 16), default=Plan.EMPIRE)
    contact_limit: Mapped[int] = mapped_column(default=10000)
    timezone: Mapped[str] = mapped_column(String(64), default="UTC")
    # Sending is refused (403) until this moment; null means no warm-up.
    warmup_until: Mapped[datetime | None] = mapped_column(default=None)
    # Live (not deleted) contacts, kept in step by every write so /me and the 402 check need no count(*).
    contacts_count: Mapped[int] = mapped_column(default=0)
    # Bumped whenever the set of live contacts changes (not when one is edited): remembered page
    # positions of the contact listing are good while it stays the same.
    contacts_version: Mapped[int] = mapped_column(default=0, server_default="0")
    # At most this many emails a day of the account's time zone (null: TIDINGS_DAILY_SEND_LIMIT; 0: no cap).
    daily_send_limit: Mapped[int | None] = mapped_column(default=None)
    # The day (in the account's time zone) `sent_today` counts, and the emails handed to workers that day.
    sent_day: Mapped[date | None] = mapped_column(default=None)
    sent_today: Mapped[int] = mapped_column(default=0, server_default="0")
    # Pacing (TIDINGS_SEND_RATE): the next free sending slot, shared by every worker.
    next_send_at: Mapped[datetime | None] = mapped_column(default=None)
    # Off: none of its emails carries the open pixel, whatever each campaign says.
    track_opens: Mapped[bool] = mapped_column(server_default=true())
    # On: its sent campaigns that opted in are public pages and a feed (app/mail/archive/archive_service.py).
    public_archive: Mapped[bool] = mapped_column(server_default=false())


class User(Timestamped, Base):
    __tablename__ = "users"
    __table_args__ = (
        Index("uq_users_email_key", "email_key", unique=True),
        Index("uq_users_username", "username", unique=True),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"), index=True)
    email: Mapped[str] = mapped_column(String(191))
    # Lowercased email: the case-insensitive unique key on both databases.
    email_key: Mapped[str] = mapped_column(String(191))
    name: Mapped[str] = mapped_column(String(191))
    username: Mapped[str | None] = mapped_column(String(30), default=None)
    display_username: Mapped[str | None] = mapped_column(String(191), default=None)
    password_hash: Mapped[str | None] = mapped_column(String(255), default=None)
    is_staff: Mapped[bool] = mapped_column(default=False)
    image: Mapped[str | None] = mapped_column(String(2048), default=None)
    email_verified: Mapped[bool] = mapped_column(default=False)


class PersonalToken(Timestamped, Base):
    __tablename__ = "personal_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(191), default="")
    # SHA-256 of the token: the token itself is shown once and never stored.
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    # The first characters, so a person can tell tokens apart in a list.
    prefix: Mapped[str] = mapped_column(String(16))
    last_used_at: Mapped[datetime | None] = mapped_column(default=None)
    revoked_at: Mapped[datetime | None] = mapped_column(default=None)


class UserSession(Timestamped, Base):
    """A signed-in browser or client (better-auth's `session`): the cookie `tidings.session_token`."""

    __tablename__ = "sessions"
    # The hourly purge (app/identity/jobs.py) finds expired rows by this.
    __table_args__ = (Index("ix_sessions_expires_at", "expires_at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # SHA-256 of the session token: a copy of the table signs no one in.
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    expires_at: Mapped[datetime]
    # False for `rememberMe: false`: a browser-session cookie and a short, never extended, lifetime.
    remember: Mapped[bool] = mapped_column(default=True)
    ip_address: Mapped[str | None] = mapped_column(String(64), default=None)
    user_agent: Mapped[str | None] = mapped_column(String(512), default=None)


class DeviceSession(Timestamped, Base):
    """A command-line sign-in in progress (/v1/auth/device-sessions): started by the command line,
    approved by a signed-in user who types the user code, and polled with the device code until its one
    token is issued. Both codes are stored only as SHA-256 hashes."""

    __tablename__ = "device_sessions"
    # The hourly purge (app/identity/jobs.py) finds expired rows by this.
    __table_args__ = (Index("ix_device_sessions_expires_at", "expires_at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    device_code_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_code_hash: Mapped[str] = mapped_column(String(64), unique=True)
    expires_at: Mapped[datetime]
    # Seconds the command line must wait between polls; raised by 5 at each `slow_down`.
    interval: Mapped[int] = mapped_column(default=5)
    last_polled_at: Mapped[datetime | None] = mapped_column(default=None)
    # Set by the approving user; `denied` when they refused instead.
    user_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), default=None, index=True
    )
    denied: Mapped[bool] = mapped_column(default=False)
    # When the token was issued: it is issued once.
    consumed_at: Mapped[datetime | None] = mapped_column(default=None)
