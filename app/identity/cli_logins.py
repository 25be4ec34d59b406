"""openmagpie's command-line login: a device session approved in the browser ends in an access token
(an hour) and a refresh token (30 days), rows of oauth_tokens issued to no registered client, so the
bearer lookup takes the access token as it takes any OAuth access token (`tdo_...`).

Refreshing revokes the pair and issues a new one; a refresh token presented again after that ends the
login. Logging out revokes the pair of the access token it is called with, and nothing else: a
personal access token (`tdg_...`) is never revoked by a logout, only by its owner's explicit revoke.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.identity.oauth.server import (
    ACCESS_TOKEN_LIFETIME,
    REFRESH_TOKEN_LIFETIME,
    _new_access_token,
    _new_refresh_token,
)
from app.identity.tokens import OAUTH_ACCESS_TOKEN_PREFIX, hash_token
from app.kit.errors import DomainError
from app.models import OAuthToken, User


@dataclass(frozen=True, slots=True)
class TokenPair:
    access_token: str
    refresh_token: str
    expires_in: int
    user: User


def issue_pair(db: Session, user: User, now: datetime) -> TokenPair:
    access, refresh = _new_access_token(), _new_refresh_token()
    db.add(
        OAuthToken(
            client_id=None,
            user_id=user.id,
            access_token_hash=hash_token(access),
            refresh_token_hash=hash_token(refresh),
            scope="",
            created_at=now,
            access_expires_at=now + ACCESS_TOKEN_LIFETIME,
            refresh_expires_at=now + REFRESH_TOKEN_LIFETIME,
        )
    )
    db.flush()
    return TokenPair(access, refresh, int(ACCESS_TOKEN_LIFETIME.total_seconds()), user)


def refused_refresh() -> DomainError:
    return DomainError(
        401, "The refresh token is unknown, used or expired; sign in again.", code="invalid_grant"
    )


def refresh_pair(db: Session, refresh_token: str, now: datetime) -> TokenPair:
    """A new pair for a live refresh token of a command-line login; the old pair is revoked. A revoked
    one presented again (it leaked, or a copy raced) ends every login of that user from the command
    line (RFC 9700 4.14.2, as for the OAuth clients)."""
    row = db.scalars(
        select(OAuthToken)
        .where(OAuthToken.refresh_token_hash == hash_token(refresh_token), OAuthToken.client_id.is_(None))
        .with_for_update()
    ).first()
    if row is None:
        raise refused_refresh()
    if row.revoked_at is not None:
        for other in db.scalars(
            select(OAuthToken).where(
                OAuthToken.user_id == row.user_id,
                OAuthToken.client_id.is_(None),
                OAuthToken.revoked_at.is_(None),
            )
        ):
            other.revoked_at = now
        db.flush()
        raise refused_refresh()
    user = db.get(User, row.user_id)
    if user is None or row.refresh_expires_at is None or row.refresh_expires_at <= now:
        raise refused_refresh()
    row.revoked_at = now
    return issue_pair(db, user, now)


def revoke_login(db: Session, bearer: str | None, now: datetime) -> int | None:
    """Ends the command-line login whose access token is `bearer` and returns its account's id (the
    caller drops it from the token cache); None, and nothing changed, for any other credential: a
    personal access token, an OAuth client's token, a cookie."""
    if bearer is None or not bearer.startswith(OAUTH_ACCESS_TOKEN_PREFIX):
        return None
    row = db.scalars(
        select(OAuthToken).where(
            OAuthToken.access_token_hash == hash_token(bearer),
            OAuthToken.client_id.is_(None),
            OAuthToken.revoked_at.is_(None),
        )
    ).first()
    user = db.get(User, row.user_id) if row is not None else None
    if row is None or user is None:
        return None
    row.revoked_at = now
    db.flush()
    return user.account_id
