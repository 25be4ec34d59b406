"""The apps a person connected through OAuth: listed on their tokens page, and disconnected there (every
token the app holds for them revoked, and any code not yet exchanged spent), as the consent page promises
("until you revoke it"). Integrations revoke their own tokens through RFC 7009 (`POST /oauth/revoke`,
authorization.revoke_token_request)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, func, or_, select, update
from sqlalchemy.orm import Session

from app.kit.time import utcnow
from app.models import OAuthAuthorizationCode, OAuthClient, OAuthToken


@dataclass(frozen=True)
class ConnectedApp:
    client_id: str
    name: str
    # When the person first let it in (its oldest live token), and when it last took a new token.
    connected_at: datetime
    last_refreshed_at: datetime


def _live(now: datetime) -> tuple[ColumnElement[bool], ColumnElement[bool]]:
    """A token still usable: not revoked, and its refresh token (or, without one, itself) not expired."""
    return (
        OAuthToken.revoked_at.is_(None),
        or_(
            OAuthToken.refresh_expires_at > now,
            (OAuthToken.refresh_expires_at.is_(None)) & (OAuthToken.access_expires_at > now),
        ),
    )


def connected_apps(db: Session, user_id: int) -> list[ConnectedApp]:
    """The apps holding a usable token of the user, most recently used first."""
    rows = db.execute(
        select(
            OAuthClient.client_id,
            OAuthClient.name,
            func.min(OAuthToken.created_at),
            func.max(OAuthToken.created_at),
        )
        .join(OAuthClient, OAuthClient.id == OAuthToken.client_id)
        .where(OAuthToken.user_id == user_id, *_live(utcnow()))
        .group_by(OAuthClient.id, OAuthClient.client_id, OAuthClient.name)
        .order_by(func.max(OAuthToken.created_at).desc())
    ).all()
    return [ConnectedApp(client_id, name, first, last) for client_id, name, first, last in rows]


def disconnect_app(db: Session, user_id: int, client_id: str) -> bool:
    """Revoke every token the app holds for the user and spend its unexchanged codes; False when it
    held none (nothing to disconnect, or no such app)."""
    client_row = db.scalar(select(OAuthClient.id).where(OAuthClient.client_id == client_id))
    if client_row is None:
        return False
    now = utcnow()
    revoked = db.scalars(
        update(OAuthToken)
        .where(
            OAuthToken.user_id == user_id,
            OAuthToken.client_id == client_row,
            OAuthToken.revoked_at.is_(None),
        )
        .values(revoked_at=now)
        .returning(OAuthToken.id)
    ).all()
    # A code granted a moment ago and not yet exchanged would otherwise bring the app straight back.
    db.execute(
        update(OAuthAuthorizationCode)
        .where(
            OAuthAuthorizationCode.user_id == user_id,
            OAuthAuthorizationCode.client_id == client_row,
            OAuthAuthorizationCode.used_at.is_(None),
        )
        .values(used_at=now)
    )
    return bool(revoked)
