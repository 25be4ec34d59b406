"""Garbage against every /api/auth route, signed in and not: always a clear 4xx (never a 5xx), in
better-auth's `{code, message}` shape, and nothing created or changed."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy.orm import Session

from app.models import User
from tests.authroutes.conftest import SAME_ORIGIN, Person, count_sessions, count_users, sign_in

ROUTES = [
    "/api/auth/is-username-available",
    "/api/auth/sign-up/email",
    "/api/auth/sign-in/username",
    "/api/auth/update-user",
    "/api/auth/sign-out",
]
DEEP = b"[" * 5000 + b"]" * 5000
BODIES: list[tuple[bytes, str]] = [
    (b"", ""),
    (b"", "application/json"),
    (b"null", "application/json"),
    (b"{", "application/json"),
    (b"[]", "application/json"),
    (b'"text"', "application/json"),
    (b"12", "application/json"),
    (b'{"username": {"$ne": null}, "password": {"$gt": ""}}', "application/json"),
    (b'{"username": ["a"], "password": true}', "application/json"),
    (b'{"username": "\\ud800", "password": "x"}', "application/json"),
    (b'{"username": "a\\u0000b", "password": "a\\u0000b", "name": "\\u0000"}', "application/json"),
    (DEEP, "application/json"),
    (b"\xff\xfe\xfd", "application/json"),
    (b"username=grace_h&password=x", "application/x-www-form-urlencoded"),
    (b"<xml/>", "application/xml"),
    (b"--x\r\nContent-Disposition: form-data; name=a\r\n\r\nb\r\n--x--", "multipart/form-data; boundary=x"),
    (b'{"username": "' + b"u" * 10_240 + b'", "password": "p"}', "application/json"),
]


@pytest.fixture
def open_client(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client(auth_signup_enabled=True, auth_username_change="always")


@pytest.mark.parametrize("signed_in", [False, True])
@pytest.mark.parametrize("route", ROUTES)
def test_garbage_bodies_are_4xx_and_change_nothing(
    open_client: TestClient, staff: Person, db: Session, route: str, signed_in: bool
) -> None:
    if signed_in:
        sign_in(open_client, staff)
    users, sessions = count_users(db), count_sessions(db)
    for content, content_type in BODIES:
        headers = {"content-type": content_type, **SAME_ORIGIN} if content_type else dict(SAME_ORIGIN)
        response = open_client.post(route, content=content, headers=headers)
        if route == "/api/auth/sign-out":
            assert response.status_code in (200, 403), (content[:40], response.text)
            continue
        assert 400 <= response.status_code < 500, (route, content[:60], response.status_code, response.text)
        body = response.json()
        assert set(body) == {"code", "message"}, body
        assert body["code"].isupper()
    if route != "/api/auth/sign-out":
        assert count_users(db) == users
        assert count_sessions(db) == sessions
    db.expire_all()
    row = db.get_one(User, staff.user_id)
    assert (row.username, row.name, row.email) == ("grace_h", "Grace_H", staff.email)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)
fields = st.fixed_dictionaries(
    {},
    optional={
        key: json_values
        for key in (
            "username",
            "password",
            "name",
            "email",
            "image",
            "displayUsername",
            "rememberMe",
            "callbackURL",
        )
    },
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=fields)
def test_any_json_object_is_answered_without_a_server_error(
    open_client: TestClient, staff: Person, body: dict[str, object]
) -> None:
    for route in ROUTES[:4]:
        response = open_client.post(route, json=body, headers=SAME_ORIGIN)
        assert response.status_code < 500, (route, body, response.text)
