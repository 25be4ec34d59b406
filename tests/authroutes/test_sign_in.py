"""POST /api/auth/sign-in/username: argon2id verification, the session cookie, `{redirect, token, user}`;
every failure 401 INVALID_USERNAME_OR_PASSWORD with the same work for unknown users; the throttle."""

from __future__ import annotations

from collections.abc import Callable
from http.cookies import SimpleCookie
from unittest import mock

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.identity import sign_in as sign_in_module
from app.identity.session_cookie import SESSION_COOKIE
from app.identity.tokens import hash_token
from app.models import UserSession
from tests.authroutes.conftest import ORIGIN, PASSWORD, Person, count_sessions

URL = "/api/auth/sign-in/username"
INVALID = {"code": "INVALID_USERNAME_OR_PASSWORD", "message": "Invalid username or password"}


def test_sign_in_answers_as_better_auth_and_sets_the_cookie(
    auth_client: TestClient, staff: Person, db: Session
) -> None:
    response = auth_client.post(
        URL, json={"username": "grace_h", "password": PASSWORD}, headers={"User-Agent": "pytest-agent"}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"redirect", "token", "user"}
    assert body["redirect"] is False
    user = body["user"]
    assert set(user) == {
        "id",
        "email",
        "emailVerified",
        "name",
        "image",
        "createdAt",
        "updatedAt",
        "username",
        "displayUsername",
    }
    assert user["id"] == str(staff.user_id)
    assert (user["username"], user["displayUsername"]) == ("grace_h", "Grace_H")
    assert user["createdAt"].endswith("Z") and len(user["createdAt"]) == len("2026-01-01T00:00:00.000Z")

    cookie = SimpleCookie(response.headers["set-cookie"])[SESSION_COOKIE]
    assert cookie["httponly"] is True
    assert cookie["samesite"].lower() == "lax"
    assert cookie["path"] == "/"
    assert cookie["max-age"] == str(7 * 24 * 3600)
    assert not cookie["secure"]  # the test base URL is http
    assert cookie.value.startswith(body["token"] + ".")

    # The token is stored only as its hash, with the client's address and agent.
    row = db.scalars(select(UserSession).where(UserSession.token_hash == hash_token(body["token"]))).one()
    assert row.user_id == staff.user_id
    assert row.user_agent == "pytest-agent"
    assert row.ip_address
    assert db.scalars(select(UserSession).where(UserSession.token_hash == body["token"])).first() is None


def test_the_cookie_is_secure_when_the_service_is_on_https(
    make_client: Callable[..., TestClient], staff: Person
) -> None:
    client = make_client(base_url="https://tidings.example")
    response = client.post(URL, json={"username": staff.username, "password": PASSWORD})
    assert response.status_code == 200
    assert SimpleCookie(response.headers["set-cookie"])[SESSION_COOKIE]["secure"] is True


def test_remember_me_false_gives_a_browser_session_cookie(auth_client: TestClient, staff: Person) -> None:
    response = auth_client.post(
        URL, json={"username": staff.username, "password": PASSWORD, "rememberMe": False}
    )
    assert response.status_code == 200
    assert not SimpleCookie(response.headers["set-cookie"])[SESSION_COOKIE]["max-age"]


def test_a_callback_url_of_this_service_is_echoed_and_others_refused(
    auth_client: TestClient, staff: Person, db: Session
) -> None:
    response = auth_client.post(
        URL, json={"username": staff.username, "password": PASSWORD, "callbackURL": "/account/tokens"}
    )
    assert response.status_code == 200
    assert response.json()["redirect"] is True
    assert response.json()["url"] == "/account/tokens"
    assert response.headers["location"] == "/account/tokens"
    sessions = count_sessions(db)
    for url in ("https://evil.example/", "//evil.example/x", "javascript:alert(1)"):
        auth_client.cookies.clear()
        response = auth_client.post(
            URL, json={"username": staff.username, "password": PASSWORD, "callbackURL": url}
        )
        assert response.status_code == 403, url
        assert response.json()["code"] == "INVALID_CALLBACK_URL"
    assert count_sessions(db) == sessions


@pytest.mark.parametrize(
    "credentials",
    [
        {"username": "grace_h", "password": "wrong password"},
        {"username": "grace_h", "password": ""},
        {"username": "", "password": PASSWORD},
        {"username": "nobody", "password": PASSWORD},
        {"username": "no", "password": PASSWORD},
        {"username": "x" * 10_000, "password": PASSWORD},
        {"username": "gr\u0430ce_h", "password": PASSWORD},
        {"username": "grace_h' OR '1'='1", "password": "' OR '1'='1"},
        {"username": "member_no_password", "password": ""},
    ],
)
def test_every_failure_is_401_and_starts_no_session(
    auth_client: TestClient,
    staff: Person,
    make_person: Callable[..., Person],
    db: Session,
    credentials: dict[str, str],
) -> None:
    make_person("member_no_password", password=None)
    response = auth_client.post(URL, json=credentials)
    assert response.status_code == 401, response.text
    assert response.json() == INVALID
    assert SESSION_COOKIE not in response.cookies
    assert count_sessions(db) == 0


def test_unknown_users_cost_the_same_argon2_verification(auth_client: TestClient, staff: Person) -> None:
    for username in ("grace_h", "nobody_here", "x" * 100):
        with mock.patch.object(
            sign_in_module, "verify_password", wraps=sign_in_module.verify_password
        ) as verify:
            assert auth_client.post(URL, json={"username": username, "password": "wrong"}).status_code == 401
        assert verify.call_count == 1, username


@pytest.mark.parametrize(
    "body",
    [
        {"username": 1, "password": "x"},
        {"username": "grace_h"},
        {"password": "x"},
        {"username": None},
        [],
        "x",
    ],
)
def test_a_body_of_the_wrong_shape_is_a_validation_error(auth_client: TestClient, body: object) -> None:
    response = auth_client.post(URL, json=body)
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "VALIDATION_ERROR"
    assert response.json()["message"].startswith("[body")


def test_ten_failures_lock_the_username_for_everyone_right_password_included(
    auth_client: TestClient, staff: Person, member: Person
) -> None:
    for _ in range(10):
        assert auth_client.post(URL, json={"username": "Grace_H", "password": "guess"}).status_code == 401
    for password in ("guess", PASSWORD):
        response = auth_client.post(URL, json={"username": "grace_h", "password": password})
        assert response.status_code == 429, response.text
        assert response.json()["code"] == "TOO_MANY_REQUESTS"
        assert 0 < int(response.headers["retry-after"]) <= 15 * 60
    # Another user behind the same address still signs in.
    response = auth_client.post(URL, json={"username": member.username, "password": PASSWORD})
    assert response.status_code == 200, response.text


def test_the_address_limit_is_far_higher_than_the_username_limit(
    auth_client: TestClient, staff: Person, member: Person
) -> None:
    for index in range(100):
        auth_client.post(URL, json={"username": f"guess{index:03d}", "password": "x"})
    response = auth_client.post(URL, json={"username": member.username, "password": PASSWORD})
    assert response.status_code == 429
    assert "retry-after" in response.headers


def test_a_forged_origin_with_a_cookie_is_refused(auth_client: TestClient, staff: Person) -> None:
    auth_client.cookies.set("something", "else")
    response = auth_client.post(
        URL,
        json={"username": staff.username, "password": PASSWORD},
        headers={"Origin": "https://evil.example"},
    )
    assert response.status_code == 403
    assert response.json() == {"code": "INVALID_ORIGIN", "message": "Invalid origin"}
    response = auth_client.post(
        URL, json={"username": staff.username, "password": PASSWORD}, headers={"Origin": ORIGIN}
    )
    assert response.status_code == 200
