"""Token lookup has one definition (token_lookup's TwoWayStatements: the principal queries and the touch) and
two executors: SessionTokenLookup (a session in a worker thread; SQLite and the in-process suite) and
PostgresTokenLookup (psycopg's async pool on the event loop; PostgreSQL). Both run here over the same
committed tokens and must find the same principal, or none: personal and OAuth tokens, revoked,
expired and unknown ones, and the mark of a personal token's use.

PostgreSQL only: the psycopg executor needs PostgreSQL and rows another connection can see."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import timedelta

import pytest
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from app.db import create_db_engine, is_sqlite_url, make_async_pool, make_session_factory, transaction
from app.identity.accounts import create_user
from app.identity.principal import Principal
from app.identity.token_lookup import PostgresTokenLookup, SessionTokenLookup
from app.identity.tokens import OAUTH_ACCESS_TOKEN_PREFIX, create_personal_token, hash_token
from app.kit.time import utcnow
from app.models import OAuthClient, OAuthToken, PersonalToken
from tests.scratch_database import scratch_database


@dataclass
class Tokens:
    factory: sessionmaker[Session]
    url: str
    personal: str  # used a minute ago (as other_user): not marked used again
    never_used: str
    revoked: str
    oauth: str
    oauth_revoked: str
    oauth_expired: str
    other_user: str


def oauth_token(session: Session, client_id: int, user_id: int, **columns: object) -> str:
    token = OAUTH_ACCESS_TOKEN_PREFIX + secrets.token_urlsafe(32)
    now = utcnow()
    values = {"access_expires_at": now + timedelta(hours=1), **columns}
    session.add(
        OAuthToken(
            client_id=client_id,
            user_id=user_id,
            access_token_hash=hash_token(token),
            created_at=now,
            **values,
        )
    )
    return token


@pytest.fixture(scope="module")
def tokens(database_url: str) -> Iterator[Tokens]:
    if is_sqlite_url(database_url):
        pytest.skip("PostgreSQL only: the psycopg executor of the token lookup runs on PostgreSQL alone")
    with scratch_database(database_url, "token_parity") as url:
        engine = create_db_engine(url)
        factory = make_session_factory(engine)
        with transaction(factory) as session:
            user = create_user(session, email="owner@example.com", name="Ownér", plan="empire", warmup_days=3)
            other = create_user(session, email="other@example.com", name="Other", plan="free")
            personal_row, personal = create_personal_token(session, user, "used")
            _, never_used = create_personal_token(session, user, "new")
            revoked_row, revoked = create_personal_token(session, user, "revoked")
            other_row, other_user = create_personal_token(session, other, "theirs")
            session.flush()
            personal_row.last_used_at = other_row.last_used_at = utcnow() - timedelta(minutes=1)
            revoked_row.revoked_at = utcnow()
            client = OAuthClient(client_id="parity", name="Parity", owner_user_id=user.id, redirect_uris="")
            session.add(client)
            session.flush()
            made = Tokens(
                factory=factory,
                url=url,
                personal=personal,
                never_used=never_used,
                revoked=revoked,
                oauth=oauth_token(session, client.id, user.id),
                oauth_revoked=oauth_token(session, client.id, user.id, revoked_at=utcnow()),
                oauth_expired=oauth_token(
                    session, client.id, user.id, access_expires_at=utcnow() - timedelta(seconds=1)
                ),
                other_user=other_user,
            )
        try:
            yield made
        finally:
            engine.dispose()


async def both(tokens: Tokens, token: str) -> tuple[Principal | None, Principal | None]:
    pool = make_async_pool(tokens.url, max_size=2)
    await pool.open()
    try:
        in_session = await SessionTokenLookup(tokens.factory).find(token)
        on_pool = await PostgresTokenLookup(pool).find(token)
    finally:
        await pool.close()
    return in_session, on_pool


def test_both_executors_find_the_same_principal(tokens: Tokens) -> None:
    for token in (tokens.personal, tokens.oauth, tokens.other_user):
        in_session, on_pool = asyncio.run(both(tokens, token))
        assert in_session is not None
        assert on_pool == in_session
    personal = asyncio.run(both(tokens, tokens.personal))[0]
    oauth = asyncio.run(both(tokens, tokens.oauth))[0]
    assert personal is not None and oauth is not None
    assert personal.token_id is not None and oauth.token_id is None and oauth.token_last_used_at is None
    assert oauth.user == personal.user and oauth.account == personal.account
    assert personal.account.warmup_until is not None and personal.account.warmup_until.tzinfo is not None


@pytest.mark.parametrize(
    "which", ["revoked", "oauth_revoked", "oauth_expired", "unknown_personal", "unknown_oauth", "other_kind"]
)
def test_both_executors_find_nothing_for_a_dead_or_unknown_token(tokens: Tokens, which: str) -> None:
    token = {
        "unknown_personal": tokens.personal[:-4] + "abcd",
        "unknown_oauth": tokens.oauth[:-4] + "abcd",
        "other_kind": "xyz_" + tokens.personal[4:],
    }.get(which) or getattr(tokens, which)
    assert asyncio.run(both(tokens, token)) == (None, None)


def test_both_executors_mark_a_personal_tokens_use_alike(tokens: Tokens) -> None:
    """A token not used for a while is marked used by either executor, and only its last_used_at moves."""
    token_hash = hash_token(tokens.never_used)

    def columns() -> tuple[object, object]:
        with tokens.factory() as session:
            row = session.query(PersonalToken).filter_by(token_hash=token_hash).one()
            return row.last_used_at, row.updated_at

    def forget_use() -> None:
        with transaction(tokens.factory) as session:
            session.execute(
                update(PersonalToken)
                .where(PersonalToken.token_hash == token_hash)
                .values(last_used_at=None, updated_at=PersonalToken.updated_at)
            )

    async def find_with(executor: str) -> Principal | None:
        if executor == "session":
            return await SessionTokenLookup(tokens.factory).find(tokens.never_used)
        pool = make_async_pool(tokens.url, max_size=1)
        await pool.open()
        try:
            return await PostgresTokenLookup(pool).find(tokens.never_used)
        finally:
            await pool.close()

    marks: dict[str, Principal] = {}
    for executor in ("session", "pool"):
        forget_use()
        _, updated_before = columns()
        started = utcnow()
        principal = asyncio.run(find_with(executor))
        assert principal is not None and principal.token_last_used_at is None
        last_used, updated = columns()
        assert isinstance(last_used, type(started)) and last_used >= started - timedelta(seconds=1)
        assert updated == updated_before
        # Marked once: the next lookup finds it used a moment ago and leaves it.
        again = asyncio.run(find_with(executor))
        assert again is not None and again.token_last_used_at == last_used
        assert columns()[0] == last_used
        marks[executor] = again
    # The same principal but for the moments of use.
    assert replace(marks["session"], token_last_used_at=None) == replace(
        marks["pool"], token_last_used_at=None
    )
