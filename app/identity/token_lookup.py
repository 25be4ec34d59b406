"""Finding a bearer token's principal (a personal access token `tdg_...` or an OAuth access token
`tdo_...`): on the event loop with psycopg's async pool on PostgreSQL, or
through a session of the app's factory in a worker thread (SQLite, and tests that share one transaction).
Both run the same statements (TwoWayStatement: one definition, compiled once for psycopg);
tests/identity/test_token_lookup_parity.py runs both over the same tokens on PostgreSQL.

Authentication runs on every request; doing it without a worker thread makes `GET /me` need none at all.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any, Protocol

from fastapi.concurrency import run_in_threadpool
from psycopg_pool import AsyncConnectionPool
from sqlalchemy import Integer, bindparam, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from app.db import TwoWayStatement, transaction
from app.identity.principal import Principal, by_oauth_access_token_hash, by_token_hash, principal_from_row
from app.identity.tokens import OAUTH_ACCESS_TOKEN_PREFIX, TOKEN_PREFIX, hash_token
from app.kit.time import utcnow
from app.models.base import UTCDateTime

log = logging.getLogger("tidings.auth")

# last_used_at is refreshed at most this often, so a busy client does not turn every read into a write.
LAST_USED_RESOLUTION = timedelta(minutes=5)


def needs_touch(principal: Principal) -> bool:
    last = principal.token_last_used_at
    return principal.token_id is not None and (last is None or utcnow() - last > LAST_USED_RESOLUTION)


class TokenLookup(Protocol):
    async def find(self, token: str) -> Principal | None: ...


# The statements of the token lookup, each defined once: SessionTokenLookup runs them through
# SQLAlchemy, PostgresTokenLookup on the async pool.
BY_TOKEN_HASH = TwoWayStatement.of(by_token_hash())
BY_OAUTH_ACCESS_TOKEN_HASH = TwoWayStatement.of(by_oauth_access_token_hash())
# Text, not update(PersonalToken): that would also set updated_at (the column's onupdate), and marking a
# token used is only a record, not a change to the token.
TOUCH = TwoWayStatement.of(
    text("UPDATE personal_tokens SET last_used_at = :now WHERE id = :token_id").bindparams(
        bindparam("now", type_=UTCDateTime()), bindparam("token_id", type_=Integer())
    )
)


def _now() -> datetime:
    # Naive UTC, as the timestamp columns store it: what psycopg sends as is and UTCDateTime keeps.
    return utcnow().replace(tzinfo=None)


def token_query(token: str) -> tuple[TwoWayStatement, dict[str, Any]] | None:
    """The query that finds the token's principal and its values; None for a token of neither kind."""
    if token.startswith(TOKEN_PREFIX):
        return BY_TOKEN_HASH, {"token_hash": hash_token(token)}
    if token.startswith(OAUTH_ACCESS_TOKEN_PREFIX):
        return BY_OAUTH_ACCESS_TOKEN_HASH, {"token_hash": hash_token(token), "now": _now()}
    return None


def touch_values(principal: Principal) -> dict[str, Any]:
    """TOUCH's values: the personal token used is marked used now."""
    return {"token_id": principal.token_id, "now": _now()}


def find_in_session(session: Session, token: str) -> Principal | None:
    found = token_query(token)
    if found is None:
        return None
    query, values = found
    row = session.execute(query.statement, values).first()
    return principal_from_row(row) if row is not None else None


class SessionTokenLookup:
    """Through a session of the app's factory, in a worker thread."""

    def __init__(self, factory: sessionmaker[Session]) -> None:
        self.factory = factory

    async def find(self, token: str) -> Principal | None:
        return await run_in_threadpool(self._find, token)

    def _find(self, token: str) -> Principal | None:
        with transaction(self.factory, write=False) as session:
            principal = find_in_session(session, token)
        if principal is not None and needs_touch(principal):
            # Its own short write, committed before the request's transaction starts; only a record.
            try:
                with transaction(self.factory) as session:
                    session.execute(TOUCH.statement, touch_values(principal))
            except SQLAlchemyError as exc:
                log.warning("could not record the use of token %s: %s", principal.token_id, exc)
        return principal


class PostgresTokenLookup:
    """Through a small pool of autocommit connections of psycopg's own async driver."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        # The app opens and closes the pool; it is shared with other hot reads.
        self.pool = pool

    async def find(self, token: str) -> Principal | None:
        found = token_query(token)
        if found is None:
            return None
        query, values = found
        async with self.pool.connection() as conn:
            cursor = await conn.execute(query.psycopg.sql, query.psycopg.params(**values))
            row = await cursor.fetchone()
            if row is None:
                return None
            principal = principal_from_row(row)
            if needs_touch(principal):
                await conn.execute(TOUCH.psycopg.sql, TOUCH.psycopg.params(**touch_values(principal)))
        return principal


# How long a process remembers a bearer token's principal: one query a second for a busy client.
TOKEN_CACHE_SECONDS = 1.0


class CachedTokenLookup:
    """Remembers each token's principal for a second, so a busy client costs one query a second.

    Reads may therefore see a revocation, a plan change or another process's contact count up to
    `ttl` seconds late. A write request always looks the token up afresh and drops what this process
    remembers of its account, so a client reading after its own write sees the write.
    """

    MAX_ENTRIES = 10_000

    def __init__(self, inner: TokenLookup, ttl: float = TOKEN_CACHE_SECONDS) -> None:
        self.inner = inner
        self.ttl = ttl
        self.entries: dict[str, tuple[float, Principal]] = {}

    async def find(self, token: str, *, fresh: bool = False) -> Principal | None:
        now = time.monotonic()
        if not fresh:
            cached = self.entries.get(token)
            if cached is not None and cached[0] > now:
                return cached[1]
        principal = await self.inner.find(token)
        if principal is None:
            self.entries.pop(token, None)
            return None
        if fresh:
            # The write that follows may change the account: nothing remembered from before it stays.
            self.forget_account(principal.account.id)
            return principal
        if len(self.entries) >= self.MAX_ENTRIES:
            self.entries.clear()
        self.entries[token] = (now + self.ttl, principal)
        return principal

    def forget_account(self, account_id: int) -> None:
        """Safe from a worker thread too (sync routes revoke tokens): list() copies the entries in one
        step under the GIL, and pop() tolerates an entry the event loop removed meanwhile."""
        for token, (_, principal) in list(self.entries.items()):
            if principal.account.id == account_id:
                self.entries.pop(token, None)


async def forget_accounts(lookup: CachedTokenLookup, account_ids: Iterable[int]) -> None:
    """Drop the accounts from the cache; a coroutine, so a response's background task runs it on the
    event loop rather than in a worker thread."""
    for account_id in account_ids:
        lookup.forget_account(account_id)
