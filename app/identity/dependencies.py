"""Who is calling: the `current_*` dependencies and their aliases (MailUser, PaidMailUser for bearer
tokens on the email API; V1User for /v1, by bearer token or session cookie; OptionalSessionUser,
SessionUser for the session cookie)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request, Response
from fastapi.concurrency import run_in_threadpool

from app.app_state import app_state
from app.identity.origin_guard import check_cookie_origin
from app.identity.principal import Principal, principal_of
from app.identity.session_cookie import (
    SESSION_COOKIE,
    clear_session_cookie,
    session_token,
    set_session_cookie,
)
from app.identity.sessions import SignedIn, extend_if_due, find_session
from app.kit.errors import DomainError
from app.models import PAID_PLANS, Account
from app.request_sessions import SessionDep, side_transaction

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
    state = app_state(request)
    writing = request.method not in ("GET", "HEAD", "OPTIONS")
    principal = await state.token_lookup.find(token, fresh=writing) if token else None
    if principal is None:
        raise Unauthenticated()
    decision = await state.mail_rate_limiter.hit("mail", str(principal.user.id))
    headers = decision.headers()
    response.headers.update(headers)
    # Error responses are made by the exception handlers, which add these too.
    setattr(request.state, RATE_LIMIT_HEADERS_STATE, headers)
    if not decision.allowed:
        raise DomainError(429, "Too Many Attempts.", code="rate_limited", headers=headers)
    return principal


MailUser = Annotated[Principal, Depends(current_mail_user)]


def require_paid_plan(principal: Principal) -> None:
    """What the email API's routes (and the console's pages over the same services) ask of the plan."""
    if principal.account.plan not in PAID_PLANS:
        raise DomainError(
            403,
            "API access requires a paid plan (lifetime or empire): the server's operator grants one with "
            f"`tidings users update {principal.user.email} --plan empire`.",
            code="forbidden",
        )


async def current_paid_mail_user(principal: MailUser) -> Principal:
    require_paid_plan(principal)
    return principal


PaidMailUser = Annotated[Principal, Depends(current_paid_mail_user)]


class V1Unauthenticated(DomainError):
    """/v1's 401, in its own words (the email API's is `Unauthenticated`)."""

    def __init__(self) -> None:
        super().__init__(
            401, "Authentication credentials were not provided or are invalid.", code="not_authenticated"
        )


async def bearer_principal(request: Request) -> Principal | None:
    token = bearer_token(request)
    if token is None:
        return None
    lookup = app_state(request).token_lookup
    # A write looks its token up afresh (and forgets what was remembered of the account), as on the
    # email API: a client always reads its own writes.
    writing = request.method not in ("GET", "HEAD", "OPTIONS")
    return await lookup.find(token, fresh=writing)


def _session_principal(request: Request, token: str) -> tuple[Principal | None, bool]:
    """The session's principal, and whether its expiry was pushed back (once a day of use). A side
    transaction: authentication's short write (an expired session found is deleted on the way, a
    session in use extended) is committed before the route's own transaction starts."""
    with side_transaction(request) as db:
        signed_in = find_session(db, token)
        if signed_in is None:
            return None, False
        account = db.get(Account, signed_in.user.account_id)
        principal = principal_of(signed_in.user, account) if account is not None else None
        extended = principal is not None and extend_if_due(db, signed_in)
        return principal, extended


async def cookie_principal(request: Request, response: Response) -> Principal | None:
    """The session cookie's user, or None (no cookie, a forged one, or an ended session). A session
    in use is extended once a day, as on /api/auth, and the cookie is sent again with it."""
    if SESSION_COOKIE not in request.cookies:
        return None
    settings = app_state(request).settings
    token = session_token(request, settings)
    if token is None:
        return None
    check_cookie_origin(request)
    principal, extended = await run_in_threadpool(_session_principal, request, token)
    if extended:
        set_session_cookie(response, token, settings, remember=True)
    return principal


async def current_v1_user(request: Request, response: Response) -> Principal:
    """The caller of a /v1 route: a personal access token (`Authorization: Bearer tdg_...`) or, without
    one, the session cookie `tidings.session_token` of /v1/auth/login or /api/auth. A write carried by
    the cookie must come from this service's own pages (the Origin guard of /api/auth), so another
    site cannot ride a session."""
    principal = await bearer_principal(request)
    if principal is None and bearer_token(request) is None:
        principal = await cookie_principal(request, response)
    if principal is None:
        raise V1Unauthenticated()
    return principal


V1User = Annotated[Principal, Depends(current_v1_user)]


def current_session(request: Request, response: Response, db: SessionDep) -> SignedIn | None:
    """The signed-in user of the session cookie `tidings.session_token`, or None.

    A cookie that is forged, unknown or expired is cleared. A session in use is extended once a day,
    with the cookie sent again. Routes that return a Response of their own must copy `response`'s
    cookies onto it (FastAPI adds them only to returned values).
    """
    settings = app_state(request).settings
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
