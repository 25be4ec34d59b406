"""Who is calling: the `current_*` dependencies and their aliases (MailUser, PaidMailUser for bearer
tokens; OptionalSessionUser, SessionUser for the session cookie)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request, Response

from app.config import Settings
from app.db import SessionDep
from app.identity.principal import Principal
from app.identity.session_cookie import (
    SESSION_COOKIE,
    clear_session_cookie,
    session_token,
    set_session_cookie,
)
from app.identity.sessions import SignedIn, extend_if_due, find_session
from app.identity.token_lookup import CachedTokenLookup
from app.kit.errors import DomainError
from app.kit.ratelimit import RateLimiter

PAID_PLANS = ("lifetime", "empire")
RATE_LIMIT_HEADERS_STATE = "rate_limit_headers"


def rate_headers(request: Request) -> dict[str, str]:
    """The rate headers authentication recorded: for error responses and for routes that return a
    Response of their own (FastAPI adds the injected response's headers only to returned values)."""
    recorded: dict[str, str] = getattr(request.state, RATE_LIMIT_HEADERS_STATE, {})
    return recorded


class Unauthenticated(DomainError):
    def __init__(self) -> None:
        super().__init__(401, "Unauthenticated.", code="not_authenticated")


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


async def current_mail_user(request: Request, response: Response) -> Principal:
    """A bearer token's owner, counted against the per-user rate limit of the email API."""
    token = bearer_token(request)
    lookup: CachedTokenLookup = request.app.state.token_lookup
    writing = request.method not in ("GET", "HEAD", "OPTIONS")
    principal = await lookup.find(token, fresh=writing) if token else None
    if principal is None:
        raise Unauthenticated()
    limiter: RateLimiter = request.app.state.mail_rate_limiter
    decision = await limiter.hit("mail", str(principal.user.id))
    headers = decision.headers()
    response.headers.update(headers)
    # Error responses are made by the exception handlers, which add these too.
    setattr(request.state, RATE_LIMIT_HEADERS_STATE, headers)
    if not decision.allowed:
        raise DomainError(429, "Too Many Attempts.", code="rate_limited", headers=headers)
    return principal


MailUser = Annotated[Principal, Depends(current_mail_user)]


async def current_paid_mail_user(principal: MailUser) -> Principal:
    if principal.account.plan not in PAID_PLANS:
        raise DomainError(403, "API access requires a paid plan (lifetime or empire).", code="forbidden")
    return principal


PaidMailUser = Annotated[Principal, Depends(current_paid_mail_user)]


def current_session(request: Request, response: Response, db: SessionDep) -> SignedIn | None:
    """The signed-in user of the session cookie `tidings.session_token`, or None.

    A cookie that is forged, unknown or expired is cleared. A session in use is extended once a day,
    with the cookie sent again. Routes that return a Response of their own must copy `response`'s
    cookies onto it (FastAPI adds them only to returned values).
    """
    settings: Settings = request.app.state.settings
    if SESSION_COOKIE not in request.cookies:
        return None
    token = session_token(request, settings)
    signed_in = find_session(db, token) if token is not None else None
    if signed_in is None:
        clear_session_cookie(response, settings)
        return None
    if extend_if_due(db, signed_in):
        set_session_cookie(response, signed_in.token, settings, remember=True)
    return signed_in


OptionalSessionUser = Annotated[SignedIn | None, Depends(current_session)]


def current_session_user(signed_in: OptionalSessionUser) -> SignedIn:
    """The session cookie's user; 401 `UNAUTHORIZED` (better-auth's sessionMiddleware) without one."""
    if signed_in is None:
        raise DomainError(401, "Unauthorized", code="UNAUTHORIZED")
    return signed_in


SessionUser = Annotated[SignedIn, Depends(current_session_user)]
