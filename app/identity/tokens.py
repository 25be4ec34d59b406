"""Personal access tokens: `tdg_` plus 43 random characters, stored only as a SHA-256 hash."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.kit.time import utcnow
from app.models import Account, PersonalToken, User

TOKEN_PREFIX = "tdg_"
# last_used_at is refreshed at most this often, so a busy client does not turn every read into a write.
LAST_USED_RESOLUTION = timedelta(minutes=5)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_personal_token(session: Session, user: User, name: str = "") -> tuple[PersonalToken, str]:
    """Make a token for `user`; returns the row and the token, which is never retrievable again."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = PersonalToken(user_id=user.id, name=name, token_hash=hash_token(token), prefix=token[:12])
    session.add(row)
    session.flush()
    return row, token


def find_token_owner(session: Session, token: str) -> tuple[User, Account] | None:
    """The user and account behind a live personal token, or None."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    found = session.execute(
        select(PersonalToken, User, Account)
        .join(User, User.id == PersonalToken.user_id)
        .join(Account, Account.id == User.account_id)
        .where(PersonalToken.token_hash == hash_token(token), PersonalToken.revoked_at.is_(None))
    ).first()
    if found is None:
        return None
    row, user, account = found
    now = utcnow()
    if row.last_used_at is None or now - row.last_used_at > LAST_USED_RESOLUTION:
        row.last_used_at = now
    return user, account
