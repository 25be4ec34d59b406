"""Who calls /v1: `FeedUser`, the one dependency every feed route takes.

Today it accepts a personal access token (`Authorization: Bearer tdg_...`). The `tidings.session_token`
cookie of CONTRACT.md is the next credential: `current_feed_user` is the seam, where a session lookup
joins the bearer lookup (try the bearer token, then the cookie), with no change to any route.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.identity.dependencies import bearer_token
from app.identity.principal import Principal
from app.identity.token_lookup import CachedTokenLookup
from app.kit.errors import DomainError


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


async def current_feed_user(request: Request) -> Principal:
    principal = await bearer_principal(request)
    if principal is None:
        raise NotAuthenticated()
    return principal


FeedUser = Annotated[Principal, Depends(current_feed_user)]
