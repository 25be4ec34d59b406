"""Personal access tokens: `tdg_` plus 43 random characters, stored only as a SHA-256 hash; listed and
revoked by their owner on /account/tokens."""

from __future__ import annotations

import hashlib
import secrets

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.kit.errors import DomainError
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


def create_token_for(session: Session, user_id: int, name: str) -> tuple[PersonalToken, str]:
    """POST /v1/auth/tokens: a token for the calling user, 401 when the user is gone meanwhile."""
    owner = session.get(User, user_id)
    if owner is None:
        raise DomainError(
            401, "Authentication credentials were not provided or are invalid.", code="not_authenticated"
        )
    return create_personal_token(session, owner, name)


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


def live_tokens_with_owners(session: Session, user_id: int | None = None) -> list[tuple[PersonalToken, str]]:
    """Tokens that still work with their owner's email, of one user or of all, oldest first (the CLI)."""
    query = (
        select(PersonalToken, User.email)
        .join(User, User.id == PersonalToken.user_id)
        .where(PersonalToken.revoked_at.is_(None))
        .order_by(PersonalToken.id)
    )
    if user_id is not None:
        query = query.where(PersonalToken.user_id == user_id)
    return [(token, email) for token, email in session.execute(query).all()]


def revoke_token_by_id(session: Session, token_id: int) -> PersonalToken:
    """Revoke any user's token (the operator's CLI); DomainError(404) when no live token has the id.
    Serving processes remember a token for up to a second, so it stops working within one."""
    token = session.scalars(select(PersonalToken).where(PersonalToken.id == token_id)).first()
    if token is None:
        raise DomainError(404, f"No token with the id {token_id}.")
    if token.revoked_at is not None:
        raise DomainError(409, f"The token {token_id} was already revoked.")
    token.revoked_at = utcnow()
    session.flush()
    return token
