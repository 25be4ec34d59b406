"""Who is calling: the `current_*` dependencies and their aliases (MailUser, PaidMailUser)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from app.db import SessionDep
from app.identity.tokens import find_token_owner
from app.kit.errors import DomainError
from app.kit.ratelimit import RateLimiter
from app.models import Account, User

PAID_PLANS = ("lifetime", "empire")
RATE_LIMIT_HEADERS_STATE = "rate_limit_headers"


@dataclass(frozen=True)
class Principal:
    user: User
    account: Account


class Unauthenticated(DomainError):
    def __init__(self) -> None:
        super().__init__(401, "Unauthenticated.", code="not_authenticated")


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def current_mail_user(request: Request, session: SessionDep) -> Principal:
    """A bearer token's owner, counted against the per-user rate limit of the email API."""
    token = bearer_token(request)
    owner = find_token_owner(session, token) if token else None
    if owner is None:
        raise Unauthenticated()
    user, account = owner
    limiter: RateLimiter = request.app.state.mail_rate_limiter
    decision = limiter.hit("mail", str(user.id))
    # Read by the middleware that puts the rate headers on every response, errors included.
    setattr(request.state, RATE_LIMIT_HEADERS_STATE, decision.headers())
    if not decision.allowed:
        raise DomainError(429, "Too Many Attempts.", code="rate_limited", headers=decision.headers())
    return Principal(user=user, account=account)


MailUser = Annotated[Principal, Depends(current_mail_user)]


async def current_paid_mail_user(principal: MailUser) -> Principal:
    # Async: a plan check does no I/O, so it need not take a worker thread.
    if principal.account.plan not in PAID_PLANS:
        raise DomainError(403, "API access requires a paid plan (lifetime or empire).", code="forbidden")
    return principal


PaidMailUser = Annotated[Principal, Depends(current_paid_mail_user)]
