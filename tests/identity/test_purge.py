"""The hourly purge of identity rows: what goes (expired sessions and device sessions, OAuth tokens that
can no longer be used or recognised, expired codes no token links to), what stays (live rows, revoked
tokens whose refresh token could still be replayed, codes that tie a chain together), that a replay still
revokes the chain after a purge, the batch loop, and the scheduler's registration of the job."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Connection, event, func, select
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.identity.jobs import PURGE_EVERY_SECONDS, IdentityJobs
from app.identity.oauth.clients import register_client
from app.identity.purge import GRACE, purge_expired
from app.identity.tokens import hash_token
from app.kit.time import utcnow
from app.models import DeviceSession, OAuthAuthorizationCode, OAuthToken, User, UserSession
from app.scheduler import Scheduler
from tests.conftest import NOON, ApiUser

# The clock stands at NOW (and ticks on from there) in every test of this module: the rows' expiry
# times are set around it, and the app reads the same clock.
pytestmark = pytest.mark.usefixtures("clock")
NOW = NOON
PAST = NOW - timedelta(days=1)
FUTURE = NOW + timedelta(days=1)


@dataclass
class Registered:
    row_id: int
    client_id: str
    secret: str


@pytest.fixture
def user(make_user: Any) -> ApiUser:
    return make_user()  # type: ignore[no-any-return]


@pytest.fixture
def oauth_client(db: Session, user: ApiUser) -> Registered:
    row, secret = register_client(db, db.get_one(User, user.user_id), "Zap", ["https://zap.example/cb"])
    db.commit()
    assert secret is not None
    return Registered(row.id, row.client_id, secret)


def count(db: Session, model: Any) -> int:
    return int(db.scalar(select(func.count()).select_from(model)) or 0)


def ids(db: Session, model: Any) -> set[int]:
    return set(db.scalars(select(model.id)))


def add_session(db: Session, user: ApiUser, expires_at: datetime) -> int:
    row = UserSession(
        user_id=user.user_id,
        token_hash=hash_token(secrets.token_urlsafe(16)),
        expires_at=expires_at,
        created_at=NOW,
        updated_at=NOW,
    )
    db.add(row)
    db.flush()
    return row.id


def add_device_session(
    db: Session, expires_at: datetime, *, user: ApiUser | None = None, consumed: bool = False
) -> int:
    row = DeviceSession(
        device_code_hash=hash_token(secrets.token_urlsafe(16)),
        user_code_hash=hash_token(secrets.token_urlsafe(16)),
        expires_at=expires_at,
        user_id=user.user_id if user else None,
        consumed_at=PAST if consumed else None,
    )
    db.add(row)
    db.flush()
    return row.id


def add_code(db: Session, user: ApiUser, client: Registered, expires_at: datetime) -> int:
    row = OAuthAuthorizationCode(
        code_hash=hash_token(secrets.token_urlsafe(16)),
        client_id=client.row_id,
        user_id=user.user_id,
        scope="mail",
        code_challenge="c" * 43,
        code_challenge_method="S256",
        created_at=expires_at - timedelta(minutes=10),
        expires_at=expires_at,
        used_at=expires_at - timedelta(minutes=5),
    )
    db.add(row)
    db.flush()
    return row.id


@dataclass
class Issued:
    row_id: int
    access_token: str
    refresh_token: str | None


def add_token(
    db: Session,
    user: ApiUser,
    client: Registered,
    *,
    access_expires_at: datetime,
    refresh_expires_at: datetime | None,
    code_id: int | None = None,
    revoked: bool = False,
) -> Issued:
    access = "tdo_" + secrets.token_urlsafe(32)
    refresh = "tdr_" + secrets.token_urlsafe(32) if refresh_expires_at is not None else None
    row = OAuthToken(
        client_id=client.row_id,
        user_id=user.user_id,
        authorization_code_id=code_id,
        access_token_hash=hash_token(access),
        refresh_token_hash=hash_token(refresh) if refresh else None,
        scope="mail",
        created_at=NOW - timedelta(days=2),
        access_expires_at=access_expires_at,
        refresh_expires_at=refresh_expires_at,
        revoked_at=PAST if revoked else None,
    )
    db.add(row)
    db.flush()
    return Issued(row.id, access, refresh)


def test_expired_sessions_go_and_live_ones_stay(
    db: Session, session_factory: sessionmaker[Session], user: ApiUser
) -> None:
    expired = add_session(db, user, PAST)
    live = add_session(db, user, FUTURE)
    db.commit()
    purged = purge_expired(session_factory, NOW)
    assert purged.sessions == 1
    assert ids(db, UserSession) == {live}
    assert expired not in ids(db, UserSession)


def test_expired_device_sessions_go_consumed_or_not_and_live_ones_stay(
    db: Session, session_factory: sessionmaker[Session], user: ApiUser
) -> None:
    add_device_session(db, PAST)  # never approved
    add_device_session(db, PAST, user=user)  # approved, never polled for its token
    add_device_session(db, PAST, user=user, consumed=True)
    pending = add_device_session(db, FUTURE)
    consumed = add_device_session(db, FUTURE, user=user, consumed=True)
    # Expired half an hour ago: kept an hour, so a late poll still hears `expired_token`.
    lately = add_device_session(db, NOW - timedelta(minutes=30))
    db.commit()
    purged = purge_expired(session_factory, NOW)
    assert purged.device_sessions == 3
    assert ids(db, DeviceSession) == {pending, consumed, lately}


def test_tokens_go_only_when_they_can_no_longer_be_used_or_recognised(
    db: Session, session_factory: sessionmaker[Session], user: ApiUser, oauth_client: Registered
) -> None:
    def token(access: datetime, refresh: datetime | None, *, revoked: bool = False) -> int:
        return add_token(
            db, user, oauth_client, access_expires_at=access, refresh_expires_at=refresh, revoked=revoked
        ).row_id

    gone = {
        token(PAST, PAST),  # refresh token expired
        token(PAST, PAST, revoked=True),  # rotated, and its refresh token has expired since
        token(PAST, None),  # no refresh token, access token expired
        token(PAST, None, revoked=True),
    }
    kept = {
        token(FUTURE, FUTURE),  # in use
        token(PAST, FUTURE),  # access token expired, refresh token still good
        token(PAST, FUTURE, revoked=True),  # rotated: a replay of its refresh token must be recognised
        token(FUTURE, None),  # no refresh token, access token still good
    }
    db.commit()
    purged = purge_expired(session_factory, NOW)
    assert purged.oauth_tokens == len(gone)
    assert ids(db, OAuthToken) == kept


def test_expired_codes_go_unless_a_remaining_token_references_them(
    db: Session, session_factory: sessionmaker[Session], user: ApiUser, oauth_client: Registered
) -> None:
    unreferenced = add_code(db, user, oauth_client, PAST)
    live = add_code(db, user, oauth_client, FUTURE)
    linking = add_code(db, user, oauth_client, PAST)
    add_token(db, user, oauth_client, access_expires_at=PAST, refresh_expires_at=FUTURE, code_id=linking)
    # Its only token goes in the same run, before the codes: then the code is free to go too.
    freed = add_code(db, user, oauth_client, PAST)
    add_token(db, user, oauth_client, access_expires_at=PAST, refresh_expires_at=PAST, code_id=freed)
    db.commit()
    purged = purge_expired(session_factory, NOW)
    assert purged.oauth_tokens == 1
    assert purged.oauth_authorization_codes == 2
    assert ids(db, OAuthAuthorizationCode) == {live, linking}
    assert unreferenced not in ids(db, OAuthAuthorizationCode)
    # The chain link of the kept token is intact (deleting its code would have set it to NULL).
    assert db.scalar(select(OAuthToken.authorization_code_id)) == linking


def test_a_replayed_refresh_token_still_revokes_its_chain_after_a_purge(
    db: Session,
    session_factory: sessionmaker[Session],
    client: TestClient,
    user: ApiUser,
    oauth_client: Registered,
) -> None:
    # One grant, refreshed twice: the oldest pair's refresh token has expired, the middle pair was
    # rotated (revoked) but its refresh token could still be presented, the newest is in use.
    code = add_code(db, user, oauth_client, PAST)
    oldest = add_token(
        db, user, oauth_client, access_expires_at=PAST, refresh_expires_at=PAST, code_id=code, revoked=True
    )
    rotated = add_token(
        db, user, oauth_client, access_expires_at=PAST, refresh_expires_at=FUTURE, code_id=code, revoked=True
    )
    newest = add_token(
        db, user, oauth_client, access_expires_at=FUTURE, refresh_expires_at=FUTURE, code_id=code
    )
    db.commit()
    bearer = {"Authorization": f"Bearer {newest.access_token}"}
    assert client.get("/me", headers=bearer).status_code == 200

    purged = purge_expired(session_factory, NOW)
    assert (purged.oauth_tokens, purged.oauth_authorization_codes) == (1, 0)
    assert ids(db, OAuthToken) == {rotated.row_id, newest.row_id}
    assert oldest.row_id not in ids(db, OAuthToken)

    # Someone presents the rotated refresh token: it is refused and the whole chain is revoked.
    replay = client.post(
        "/oauth/token",
        data={
            "grant_type": "refresh_token",
            "refresh_token": rotated.refresh_token,
            "client_id": oauth_client.client_id,
            "client_secret": oauth_client.secret,
        },
    )
    assert replay.status_code == 400, replay.text
    assert replay.json()["error"] == "invalid_grant"
    db.expire_all()
    assert db.get_one(OAuthToken, newest.row_id).revoked_at is not None
    assert client.get("/me", headers=bearer).status_code == 401


@pytest.fixture
def deletes(connection: Connection) -> Iterator[list[str]]:
    """The DELETE statements sent on the test's connection."""
    sent: list[str] = []

    def note(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("DELETE"):
            sent.append(statement)

    event.listen(connection, "before_cursor_execute", note)
    yield sent
    event.remove(connection, "before_cursor_execute", note)


def test_the_purge_deletes_in_batches_until_one_comes_back_short(
    db: Session, session_factory: sessionmaker[Session], user: ApiUser, deletes: list[str]
) -> None:
    for _ in range(5):
        add_session(db, user, PAST)
    live = add_session(db, user, FUTURE)
    db.commit()
    purged = purge_expired(session_factory, NOW, batch_size=2)
    assert purged.sessions == 5
    assert ids(db, UserSession) == {live}
    session_deletes = [s for s in deletes if "FROM sessions" in s]
    assert len(session_deletes) == 3  # 2, 2, then 1: short, so the loop ends
    # One DELETE for each of the other tables, each of which had nothing to purge.
    assert len(deletes) == 3 + 3


def test_the_job_keeps_rows_within_the_grace_period_and_logs_what_went(
    db: Session,
    session_factory: sessionmaker[Session],
    user: ApiUser,
    oauth_client: Registered,
    caplog: pytest.LogCaptureFixture,
) -> None:
    add_session(db, user, PAST)
    just_expired = add_session(db, user, utcnow() - GRACE / 2)
    add_device_session(db, PAST)
    add_token(db, user, oauth_client, access_expires_at=PAST, refresh_expires_at=PAST)
    add_code(db, user, oauth_client, PAST)
    db.commit()
    with caplog.at_level(logging.INFO, logger="tidings.identity.jobs"):
        assert asyncio.run(IdentityJobs(session_factory).purge()) == 0
    assert ids(db, UserSession) == {just_expired}
    assert count(db, DeviceSession) == count(db, OAuthToken) == count(db, OAuthAuthorizationCode) == 0
    assert [r.getMessage() for r in caplog.records] == [
        "purged 1 expired sessions, 1 device sessions, 1 OAuth tokens and 1 authorization codes"
    ]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tidings.identity.jobs"):
        asyncio.run(IdentityJobs(session_factory).purge())
    assert caplog.records == []  # nothing went: nothing said


def test_the_scheduler_runs_the_purge_hourly(
    db: Session, session_factory: sessionmaker[Session], settings: Settings, user: ApiUser
) -> None:
    add_session(db, user, PAST)
    db.commit()
    scheduler = Scheduler(settings, session_factory)

    async def run_registered() -> tuple[float, int]:
        try:
            (job,) = [job for job in scheduler.jobs() if job.name == "identity purge"]
            return job.interval, await job.run()
        finally:
            await scheduler.stop()

    interval, did = asyncio.run(run_registered())
    assert interval == PURGE_EVERY_SECONDS == 3600.0
    assert did == 0  # sleeps an hour after each run
    assert count(db, UserSession) == 0
