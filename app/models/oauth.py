"""OAuth 2.0 for the email API: registered clients, authorization codes, and the tokens they yield."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, Timestamped

NO_REFRESH_TOKEN = text("refresh_token_hash IS NULL")


class OAuthClient(Timestamped, Base):
    __tablename__ = "oauth_clients"

    id: Mapped[int] = mapped_column(primary_key=True)
    # The public identifier integrations send as `client_id`.
    client_id: Mapped[str] = mapped_column(String(64), unique=True)
    # SHA-256 of the secret (shown once); null for a public client, which proves itself with PKCE alone.
    client_secret_hash: Mapped[str | None] = mapped_column(String(64), default=None)
    name: Mapped[str] = mapped_column(String(191))
    # The user who registered it (`tidings oauth-clients create --email`).
    owner_user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # Registered redirect URIs, one a line; a redirect_uri must equal one of them exactly.
    redirect_uris: Mapped[str] = mapped_column(Text)


class OAuthAuthorizationCode(Base):
    __tablename__ = "oauth_authorization_codes"
    # The hourly purge (app/identity/jobs.py) finds expired codes by this.
    __table_args__ = (Index("ix_oauth_authorization_codes_expires_at", "expires_at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    code_hash: Mapped[str] = mapped_column(String(64), unique=True)
    client_id: Mapped[int] = mapped_column(ForeignKey("oauth_clients.id", ondelete="CASCADE"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # As sent in the authorization request (null when it was left out); the token request must repeat it.
    redirect_uri: Mapped[str | None] = mapped_column(String(2048), default=None)
    scope: Mapped[str] = mapped_column(String(255), default="")
    code_challenge: Mapped[str] = mapped_column(String(128))
    code_challenge_method: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime]
    expires_at: Mapped[datetime]
    # Kept after use so that a second use is recognised and revokes what the first one yielded.
    used_at: Mapped[datetime | None] = mapped_column(default=None)


class OAuthToken(Base):
    """An access token and its refresh token. Refreshing revokes the row and issues a new one."""

    __tablename__ = "oauth_tokens"
    # The hourly purge (app/identity/jobs.py) deletes a row once its refresh token has expired, or, for a
    # row without one, once its access token has. Partial, because nearly every row has a refresh token
    # and an access token an hour old: a plain index on access_expires_at would match almost all of them.
    __table_args__ = (
        Index("ix_oauth_tokens_refresh_expires_at", "refresh_expires_at"),
        Index(
            "ix_oauth_tokens_access_expires_at_no_refresh",
            "access_expires_at",
            postgresql_where=NO_REFRESH_TOKEN,
            sqlite_where=NO_REFRESH_TOKEN,
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    # Null for openmagpie's command line signed in by a device session (app/identity/cli_logins.py).
    client_id: Mapped[int | None] = mapped_column(
        ForeignKey("oauth_clients.id", ondelete="CASCADE"), index=True, default=None
    )
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # The grant every token of one chain of refreshes descends from, so a replayed code or refresh
    # token can revoke the whole chain.
    authorization_code_id: Mapped[int | None] = mapped_column(
        ForeignKey("oauth_authorization_codes.id", ondelete="SET NULL"), index=True, default=None
    )
    access_token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    refresh_token_hash: Mapped[str | None] = mapped_column(String(64), unique=True, default=None)
    scope: Mapped[str] = mapped_column(String(255), default="")
    created_at: Mapped[datetime]
    access_expires_at: Mapped[datetime]
    refresh_expires_at: Mapped[datetime | None] = mapped_column(default=None)
    revoked_at: Mapped[datetime | None] = mapped_column(default=None)
