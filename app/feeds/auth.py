"""Who calls /v1: `FeedUser`, the one dependency every feed route takes.

It accepts a personal access token (`Authorization: Bearer tdg_...`) and, without one, the session
cookie `tidings.session_token` of /v1/auth/login or /api/auth. A write carried by the cookie must come
from this service's own pages (the Origin guard of /api/auth), so another site cannot ride a session.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.identity.dependencies import bearer_token
from app.identity.origin_guard import check_cookie_origin
from app.identity.principal import Principal, principal_of
from app.identity.session_cookie import SESSION_COOKIE, session_token
from app.identity.sessions import find_session
from app.identity.token_lookup import CachedTokenLookup
from app.kit.errors import DomainError
from app.models import Account


class NotAuthenticated(DomainError):
    def __init__(self) -> None:
        super().__init__(
            401, "Authentication credentials were not provided or are invalid.", code="not_authenticated"
        )


async def bearer_principal(request: Request) -> Principal | None:
    token = bearer_token(request)
    if token is None:
        return None
    lookup: CachedTokenLookup = request.app.state.token_lookup
    # A write looks its token up afresh (and forgets what was remembered of the account), as on the
    # email API: a client always reads its own writes.
    writing = request.method not in ("GET", "HEAD", "OPTIONS")
    return await lookup.find(token, fresh=writing)


def _session_principal(factory: sessionmaker[Session], token: str) -> Principal | None:
    with factory() as db:
        signed_in = find_session(db, token)
        if signed_in is None:
            db.commit()  # an expired session found is deleted on the way
            return None
        account = db.get(Account, signed_in.user.account_id)
        principal = principal_of(signed_in.user, account) if account is not None else None
        db.commit()
        return principal


async def cookie_principal(request: Request) -> Principal | None:
    """The session cookie's user, or None (no cookie, a forged one, or an ended session)."""
    if SESSION_COOKIE not in request.cookies:
        return None
    settings: Settings = request.app.state.settings
    token = session_token(request, settings)
    if token is None:
        return None
    check_cookie_origin(request)
    factory: sessionmaker[Session] = request.app.state.write_session_factory
    return await run_in_threadpool(_session_principal, factory, token)


async def current_feed_user(request: Request) -> Principal:
    principal = await bearer_principal(request)
    if principal is None and bearer_token(request) is None:
        principal = await cookie_principal(request)
    if principal is None:
        raise NotAuthenticated()
    return principal


FeedUser = Annotated[Principal, Depends(current_feed_user)]
