"""Personal access tokens: `tdg_` plus 43 random characters, stored only as a SHA-256 hash; listed and
revoked by their owner on /account/tokens."""

from __future__ import annotations

import hashlib
import secrets

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.kit.time import utcnow
from app.models import PersonalToken, User

TOKEN_PREFIX = "tdg_"
# OAuth 2.0 tokens (app/identity/oauth): the prefix tells the bearer lookup which table holds a token.
OAUTH_ACCESS_TOKEN_PREFIX = "tdo_"
OAUTH_REFRESH_TOKEN_PREFIX = "tdr_"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_personal_token(session: Session, user: User, name: str = "") -> tuple[PersonalToken, str]:
    """Make a token for `user`; returns the row and the token, which is never retrievable again."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = PersonalToken(user_id=user.id, name=name, token_hash=hash_token(token), prefix=token[:12])
    session.add(row)
    session.flush()
    return row, token


def live_personal_tokens(session: Session, user_id: int) -> list[PersonalToken]:
    """The user's tokens that still work, newest first."""
    return list(
        session.scalars(
            select(PersonalToken)
            .where(PersonalToken.user_id == user_id, PersonalToken.revoked_at.is_(None))
            .order_by(PersonalToken.id.desc())
        )
    )


def revoke_personal_token(session: Session, user_id: int, token_id: int) -> PersonalToken | None:
    """Revoke one of the user's own tokens; None when it is not theirs or was already revoked. The
    caller must also drop the account from the bearer-token cache so the revocation counts at once."""
    token = session.scalars(
        select(PersonalToken).where(
            PersonalToken.id == token_id,
            PersonalToken.user_id == user_id,
            PersonalToken.revoked_at.is_(None),
        )
    ).first()
    if token is not None:
        token.revoked_at = utcnow()
        session.flush()
    return token
