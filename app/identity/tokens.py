"""Personal access tokens: `tdg_` plus 43 random characters, stored only as a SHA-256 hash."""

from __future__ import annotations

import hashlib
import secrets

from sqlalchemy.orm import Session

from app.models import PersonalToken, User

TOKEN_PREFIX = "tdg_"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_personal_token(session: Session, user: User, name: str = "") -> tuple[PersonalToken, str]:
    """Make a token for `user`; returns the row and the token, which is never retrievable again."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = PersonalToken(user_id=user.id, name=name, token_hash=hash_token(token), prefix=token[:12])
    session.add(row)
    session.flush()
    return row, token
