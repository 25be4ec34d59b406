"""Sign-in sessions (better-auth's `session` table): started at sign-in, found by the cookie's token,
extended while in use, ended at sign-out. The token is stored only as a SHA-256 hash."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.identity.tokens import hash_token
from app.kit.time import utcnow
from app.models import User, UserSession

# better-auth's defaults: a session lasts 7 days and is extended when used a day or more after it was
# last extended; `rememberMe: false` gives one day, never extended.
SESSION_LIFETIME = timedelta(days=7)
SESSION_UPDATE_AGE = timedelta(days=1)
SHORT_SESSION_LIFETIME = timedelta(days=1)
USER_AGENT_MAX_LENGTH = 512
IP_ADDRESS_MAX_LENGTH = 64


@dataclass(frozen=True)
class SignedIn:
    """A live session, its user, and the token the client presented (needed to answer get-session)."""

    session: UserSession
    user: User
    token: str


def start_session(
    db: Session,
    user: User,
    *,
    remember: bool = True,
    ip_address: str | None = None,
    user_agent: str | None = None,
) -> SignedIn:
    token = secrets.token_urlsafe(32)
    now = utcnow()
    row = UserSession(
        user_id=user.id,
        token_hash=hash_token(token),
        expires_at=now + (SESSION_LIFETIME if remember else SHORT_SESSION_LIFETIME),
        remember=remember,
        ip_address=(ip_address or None) and ip_address[:IP_ADDRESS_MAX_LENGTH],
        # A header may hold any byte; PostgreSQL refuses NUL in text.
        user_agent=(user_agent or "").replace("\x00", "")[:USER_AGENT_MAX_LENGTH] or None,
        created_at=now,
        updated_at=now,
    )
    db.add(row)
    db.flush()
    return SignedIn(row, user, token)


def find_session(db: Session, token: str) -> SignedIn | None:
    """The live session of `token`. An expired one is deleted on the way (as better-auth does)."""
    row = db.execute(
        select(UserSession, User)
        .join(User, User.id == UserSession.user_id)
        .where(UserSession.token_hash == hash_token(token))
    ).first()
    if row is None:
        return None
    session, user = row
    if session.expires_at <= utcnow():
        db.delete(session)
        db.flush()
        return None
    return SignedIn(session, user, token)


def extend_if_due(db: Session, signed_in: SignedIn) -> bool:
    """Push the expiry back to a full lifetime once a day of use; True when it moved (the cookie
    should then be sent again with a fresh Max-Age)."""
    session = signed_in.session
    if not session.remember:
        return False
    now = utcnow()
    if session.expires_at - SESSION_LIFETIME + SESSION_UPDATE_AGE > now:
        return False
    session.expires_at = now + SESSION_LIFETIME
    session.updated_at = now
    db.flush()
    return True


def end_session(db: Session, token: str) -> None:
    db.execute(delete(UserSession).where(UserSession.token_hash == hash_token(token)))
