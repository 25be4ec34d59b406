"""Deletes identity rows that can no longer be used or recognised, in bounded batches: expired sign-in
sessions and device sessions, OAuth tokens past their last use, and expired authorization codes no token
still links to. Run hourly by app/identity/jobs.py."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, and_, delete, exists, or_, select
from sqlalchemy.orm import Session, sessionmaker

from app.db import skip_locked, transaction
from app.models import DeviceSession, OAuthAuthorizationCode, OAuthToken, UserSession

# Each DELETE removes at most this many rows in its own transaction, so a large backlog never holds its
# locks (SQLite's one write lock above all) for long.
BATCH_SIZE = 1000
# Rows go only this long after they expired: a request that found a session, device session or code valid
# an instant before its expiry may still be writing to it (extending the session, consuming the device
# session, linking the new token to its code), and would otherwise fail or lose the chain link.
GRACE = timedelta(minutes=10)
# An expired device session stays a while longer, so a command line still polling past the expiry hears
# `expired_token` (RFC 8628) rather than `invalid_grant` for a code that no longer exists.
DEVICE_SESSION_AFTERLIFE = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class Purged:
    sessions: int
    device_sessions: int
    oauth_tokens: int
    oauth_authorization_codes: int

    @property
    def total(self) -> int:
        return self.sessions + self.device_sessions + self.oauth_tokens + self.oauth_authorization_codes


def purge_expired(
    session_factory: sessionmaker[Session], before: datetime, *, batch_size: int = BATCH_SIZE
) -> Purged:
    """Delete what expired before `before` (the job passes now minus GRACE)."""
    sessions = _purge(session_factory, UserSession, UserSession.expires_at < before, batch_size)
    device_sessions = _purge(
        session_factory,
        DeviceSession,
        DeviceSession.expires_at < before - DEVICE_SESSION_AFTERLIFE,
        batch_size,
    )
    # A revoked row whose refresh token has not expired stays: presenting that refresh token again is how
    # reuse is detected (server.RotatingRefreshGrant revokes the row's whole chain), so the row must still
    # be found by its hash. Once the refresh token has expired, or for a row without one once the access
    # token has, nothing can be done with the row.
    oauth_tokens = _purge(
        session_factory,
        OAuthToken,
        or_(
            OAuthToken.refresh_expires_at < before,
            and_(OAuthToken.refresh_token_hash.is_(None), OAuthToken.access_expires_at < before),
        ),
        batch_size,
    )
    # After the tokens, so codes whose last token just went are freed in the same run. A code a token
    # still references stays: it is the chain link (authorization_code_id) every refresh of that grant
    # carries, and deleting it would set the link to NULL, so a replay could no longer revoke the chain.
    # An expired code itself can no longer be exchanged, nor does its replay revoke anything
    # (server.CodeGrant.query_authorization_code ignores expired codes), so it is otherwise useless.
    codes = _purge(
        session_factory,
        OAuthAuthorizationCode,
        and_(
            OAuthAuthorizationCode.expires_at < before,
            ~exists().where(OAuthToken.authorization_code_id == OAuthAuthorizationCode.id),
        ),
        batch_size,
    )
    return Purged(sessions, device_sessions, oauth_tokens, codes)


def _purge(
    session_factory: sessionmaker[Session],
    model: Any,
    condition: ColumnElement[bool],
    batch_size: int,
) -> int:
    """DELETE up to `batch_size` matching rows a transaction until a batch comes back short."""
    total = 0
    while True:
        with transaction(session_factory) as session:
            # SKIP LOCKED: a row a request holds (a session being extended) is left for the next run
            # instead of making the purge wait; and two processes purging at once split the rows.
            batch = (
                select(model.id)
                .where(condition)
                .limit(batch_size)
                .with_for_update(of=model, **skip_locked(session))
            )
            result = session.execute(
                delete(model)
                .where(model.id.in_(batch.scalar_subquery()))
                .execution_options(synchronize_session=False)
            )
            deleted = int(result.rowcount or 0)  # type: ignore[attr-defined]
        total += deleted
        if deleted < batch_size:
            return total
