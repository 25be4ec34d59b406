"""Garbage thrown at every /v1/auth write: never a 5xx; a refusal is in the /v1 error shape and signs
nobody up, makes no token and completes no device session. (Unknown keys are ignored, so an object
is a token request without a name, and an empty body approves a device session.)"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.models import Account, DeviceSession, PersonalToken, User, UserSession
from tests.authroutes.conftest import ORIGIN, PASSWORD, SAME_ORIGIN, Person

NESTED_LIST = b"[" * 1000 + b"]" * 1000
NESTED_OBJECT = b'{"a":' * 1000 + b"1" + b"}" * 1000
GARBAGE: list[bytes] = [
    b"",
    b"{",
    b"\xff\xfe",
    b'"text"',
    NESTED_LIST,
    NESTED_OBJECT,
    b'{"email": ' + NESTED_OBJECT + b', "password": "x"}',
    b'{"email": "a\\u0000@example.com", "password": "correct horse battery"}',
    b'{"email": "new@example.com", "password": "correct horse battery", "name": {"a\\u0000": 1}}',
    b'{"name": "' + b"x" * 5000 + b'"}',
    b'{"device_code": ' + NESTED_LIST + b"}",
    b'{"approve": "maybe"}',
]


def counts(db: Session) -> tuple[int, ...]:
    db.expire_all()
    models = (User, Account, UserSession, PersonalToken, DeviceSession)
    return tuple(db.scalar(select(func.count()).select_from(model)) or 0 for model in models)


@pytest.mark.parametrize("raw", GARBAGE, ids=range(len(GARBAGE)))
def test_garbage_to_every_auth_write_is_never_a_5xx_and_a_refusal_changes_nothing(
    make_client: Callable[..., TestClient], member: Person, db: Session, raw: bytes
) -> None:
    stranger = make_client(auth_signup_enabled=True)
    signed_in = make_client(auth_signup_enabled=True)
    login = {"email": member.email, "password": PASSWORD}
    assert signed_in.post("/v1/auth/login", json=login, headers=SAME_ORIGIN).status_code == 200
    started = stranger.post("/v1/auth/device-sessions").json()
    writes = [
        (stranger, "/v1/auth/signup"),
        (stranger, "/v1/auth/login"),
        (stranger, "/v1/auth/device-sessions/token"),
        (signed_in, "/v1/auth/tokens"),
        (signed_in, f"/v1/auth/device-sessions/{started['user_code']}/complete"),
    ]
    headers = {"Origin": ORIGIN, "Content-Type": "application/json"}
    for client, path in writes:
        before = counts(db)
        response = client.post(path, content=raw, headers=headers)
        assert response.status_code < 500, (path, response.status_code, response.text[:300])
        if client is stranger:
            # None of these is a sign-up, a login or a device code.
            assert response.status_code == 400, (path, response.text[:300])
        if response.status_code >= 400:
            assert set(response.json()) == {"error", "detail"}
            assert counts(db) == before, path
